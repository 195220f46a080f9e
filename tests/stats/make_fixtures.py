#!/usr/bin/python3
"""Reference values for tests/stats/test_stats.cpp, computed with SciPy and statsmodels.

Run with the Debian Python (python3-scipy, python3-statsmodels, python3-mpmath):
    /usr/bin/python3 tests/stats/make_fixtures.py
It rewrites fixtures/{paired_t,one_way_anova,two_way_anova}.json. Every case stores its inputs
next to its outputs; the inputs are drawn from fixed seeds, so the files are reproducible.
"""
import json
import os

import mpmath
import numpy as np
import pandas as pd
import scipy
import scipy.stats as st
import statsmodels
import statsmodels.formula.api as smf
from statsmodels.stats.anova import anova_lm

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
SOURCE = "scipy %s, statsmodels %s" % (scipy.__version__, statsmodels.__version__)


def floats(a):
    return [float(v) for v in a]


def write(name, cases):
    with open(os.path.join(OUT, name), "w") as f:
        # allow_nan=False: a reference must never be NaN or infinite.
        json.dump({"made_by": "tests/stats/make_fixtures.py", "source": SOURCE, "cases": cases},
                  f, indent=1, allow_nan=False)
        f.write("\n")


# ---- paired t-tests: scipy.stats.ttest_rel; d_z = mean / sd (ddof = 1) ----------------------
def t_quantile(upper_tail, df):
    """t with P(T_df >= t) = upper_tail, by mpmath at 40 digits. SciPy 1.10's t.ppf is only good
    to about 5e-9 relative (stdtrit), too coarse for a 1e-8 check of the interval bounds."""
    with mpmath.workdps(40):
        nu = mpmath.mpf(df)
        tail = lambda t: mpmath.betainc(nu / 2, mpmath.mpf(1) / 2, 0, nu / (nu + t * t),
                                        regularized=True) / 2
        return mpmath.findroot(lambda t: tail(t) - mpmath.mpf(upper_tail), 2)


def paired_case(name, x, y, alternative="two-sided", confidence=0.95):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    res = st.ttest_rel(x, y, alternative=alternative)
    # The two-sided interval whatever the alternative (dcalign's convention); SciPy's interval
    # checks the mpmath one to SciPy's own accuracy.
    d = x - y
    se = np.std(d, ddof=1) / np.sqrt(len(d))
    q = t_quantile((1 - mpmath.mpf(confidence)) / 2, len(d) - 1)
    ci_low, ci_high = float(np.mean(d) - q * se), float(np.mean(d) + q * se)
    ci = st.ttest_rel(x, y).confidence_interval(confidence)
    assert abs(ci.low - ci_low) < 1e-7 * se and abs(ci.high - ci_high) < 1e-7 * se
    return {
        "name": name, "x": floats(x), "y": floats(y), "alternative": alternative,
        "confidence": confidence,
        "expected": {
            "n": int(len(x)), "t": float(res.statistic), "df": float(res.df),
            "p": float(res.pvalue), "mean_diff": float(np.mean(d)),
            "sd_diff": float(np.std(d, ddof=1)),
            "cohens_dz": float(np.mean(d) / np.std(d, ddof=1)),
            "ci_lower": ci_low, "ci_upper": ci_high,
        },
    }


def paired_cases():
    rng = np.random.default_rng(20240515)
    cases = [paired_case("n2", [1.3, 2.9], [0.5, 1.1])]
    # Ties: accuracies on a 0.5-point grid, several identical differences and zero differences.
    y = np.round(rng.normal(90, 2, 15) * 2) / 2
    x = y + np.array([0.5, 0, 0.5, 1, 0, -0.5, 0.5, 0.5, 1, 0, 0.5, 1.5, 0, 0.5, 0.5])
    cases.append(paired_case("ties", x, y))
    # 001 Table 13 style: 100 runs, random variant worse, left-tailed test.
    iden = 96.2 + rng.normal(0, 0.25, 100)
    rand = iden - 0.8 + rng.normal(0, 0.55, 100)
    cases.append(paired_case("less_significant", rand, iden, "less"))
    # The same data with the other one-sided alternative: p close to 1.
    cases.append(paired_case("greater_wrong_direction", rand, iden, "greater"))
    x = rng.normal(0.3, 1, 25)
    y = rng.normal(0, 1, 25)
    cases.append(paired_case("greater_significant", x + 0.2, y, "greater", 0.90))
    cases.append(paired_case("less_wrong_direction", x + 0.2, y, "less", 0.99))
    # A large effect: p near 1e-30.
    base = rng.normal(50, 5, 40)
    noise = rng.normal(0, 1, 40)
    noise = (noise - noise.mean()) / noise.std(ddof=1)
    cases.append(paired_case("tiny_p", base + 2.75 + 0.5 * noise, base))
    cases.append(paired_case("tiny_p_greater", base + 2.75 + 0.5 * noise, base, "greater"))
    # No effect at all in expectation, moderate n.
    cases.append(paired_case("null", rng.normal(0, 1, 30), rng.normal(0, 1, 30), "two-sided",
                             0.80))
    p = cases[6]["expected"]["p"]
    assert 1e-33 < p < 1e-27, p
    return cases


# ---- one-way ANOVA: scipy.stats.f_oneway for F and p, statsmodels OLS for the SS ------------
def one_way_case(name, groups):
    groups = [np.asarray(g, dtype=float) for g in groups]
    F, p = st.f_oneway(*groups)
    df = pd.DataFrame({"y": np.concatenate(groups),
                       "g": np.concatenate([[f"g{i}"] * len(g) for i, g in enumerate(groups)])})
    table = anova_lm(smf.ols("y ~ C(g)", df).fit(), typ=1)
    ssb = table.loc["C(g)", "sum_sq"]
    ssw = table.loc["Residual", "sum_sq"]
    assert abs(table.loc["C(g)", "F"] - F) <= 1e-10 * F
    eta2 = ssb / (ssb + ssw)
    return {
        "name": name, "groups": [floats(g) for g in groups],
        "expected": {
            "ss_between": float(ssb), "ss_within": float(ssw), "ss_total": float(ssb + ssw),
            "df_between": float(table.loc["C(g)", "df"]),
            "df_within": float(table.loc["Residual", "df"]), "F": float(F), "p": float(p),
            "eta_squared": float(eta2), "cohens_f": float(np.sqrt(eta2 / (1 - eta2))),
        },
    }


def one_way_cases():
    rng = np.random.default_rng(7)
    cases = []
    sizes = [5, 8, 12, 7]
    cases.append(one_way_case("unequal_4_groups",
                              [rng.normal(m, 1.5, s) for m, s in zip([0, 1, 0.5, 2], sizes)]))
    cases.append(one_way_case("two_groups_3_and_10", [rng.normal(10, 2, 3), rng.normal(12, 2, 10)]))
    # 001 Table 17/18 layout: 4 anchor sizes x 100 runs, metric near 0.8.
    cases.append(one_way_case("anchor_sizes_4x100",
                              [0.80 + 0.01 * k + rng.normal(0, 0.03, 100) for k in range(4)]))
    cases.append(one_way_case("no_effect_unequal",
                              [rng.normal(0, 1, s) for s in [9, 4, 6, 11, 3]]))
    return cases


# ---- two-way ANOVA: statsmodels anova_lm(typ=2 / typ=3) on y ~ C(a, Sum) * C(b, Sum) --------
ROWS = {"A": "C(a, Sum)", "B": "C(b, Sum)", "A:B": "C(a, Sum):C(b, Sum)"}


def two_way_reference(df, typ):
    table = anova_lm(smf.ols("y ~ C(a, Sum) * C(b, Sum)", df).fit(), typ=typ)
    res = table.loc["Residual"]
    out = {"ss_residual": float(res["sum_sq"]), "df_residual": float(res["df"])}
    for key, row in ROWS.items():
        r = table.loc[row]
        peta2 = r["sum_sq"] / (r["sum_sq"] + res["sum_sq"])
        out[key] = {"ss": float(r["sum_sq"]), "df": float(r["df"]), "F": float(r["F"]),
                    "p": float(r["PR(>F)"]), "partial_eta_squared": float(peta2),
                    "cohens_f": float(np.sqrt(peta2 / (1 - peta2)))}
    return out


def rank_reference(df):
    """Type II by nested least squares with numpy's SVD-based lstsq and matrix_rank, for a design
    with an empty cell (statsmodels' anova_lm counts columns rather than ranks there)."""
    y = df["y"].to_numpy()
    la = sorted(df["a"].unique())
    lb = sorted(df["b"].unique())
    A = np.array([[1.0 if v == l else 0.0 for l in la[1:]] for v in df["a"]])
    B = np.array([[1.0 if v == l else 0.0 for l in lb[1:]] for v in df["b"]])
    AB = np.column_stack([A[:, i] * B[:, j] for i in range(A.shape[1]) for j in range(B.shape[1])])
    one = np.ones((len(y), 1))

    def fit(*blocks):
        X = np.column_stack((one,) + blocks)
        beta = np.linalg.lstsq(X, y, rcond=None)[0]
        return X @ beta, np.linalg.matrix_rank(X)

    f_full, r_full = fit(A, B, AB)
    f_ab, r_ab = fit(A, B)
    f_a, r_a = fit(A)
    f_b, r_b = fit(B)
    ss_res = float(np.sum((y - f_full) ** 2))
    df_res = float(len(y) - r_full)
    out = {"ss_residual": ss_res, "df_residual": df_res}
    for key, (big, small, rb, rs) in {"A": (f_ab, f_b, r_ab, r_b), "B": (f_ab, f_a, r_ab, r_a),
                                      "A:B": (f_full, f_ab, r_full, r_ab)}.items():
        ss = float(np.sum((big - small) ** 2))
        dfe = float(rb - rs)
        F = (ss / dfe) / (ss_res / df_res)
        peta2 = ss / (ss + ss_res)
        out[key] = {"ss": ss, "df": dfe, "F": F, "p": float(st.f.sf(F, dfe, df_res)),
                    "partial_eta_squared": peta2, "cohens_f": float(np.sqrt(ss / ss_res))}
    return out


def two_way_case(name, df, types=(2, 3), reference=two_way_reference):
    case = {"name": name, "y": floats(df["y"]), "a": list(df["a"]), "b": list(df["b"])}
    for typ in types:
        case["type%d" % typ] = reference(df) if typ == 2 and reference is rank_reference \
            else two_way_reference(df, typ)
    return case


def design(rng, la, lb, counts, effect):
    rows = []
    for i, a in enumerate(la):
        for j, b in enumerate(lb):
            for _ in range(counts[i][j]):
                rows.append((a, b, effect(i, j) + rng.normal(0, 1)))
    return pd.DataFrame(rows, columns=["a", "b", "y"])


def two_way_cases():
    rng = np.random.default_rng(99)
    cases = []
    # Balanced 2 x 4 x 5 (types II and III coincide).
    df = design(rng, ["uniform", "pubchem"], ["512", "1024", "2048", "4096"], [[5] * 4] * 2,
                lambda i, j: 0.7 * i + 0.3 * j + 0.2 * i * j)
    cases.append(two_way_case("balanced_2x4", df))
    # Unbalanced 3 x 3 with a strong interaction: types II and III differ.
    counts = [[2, 6, 3], [5, 2, 4], [3, 7, 2]]
    df = design(rng, ["x", "y", "z"], ["p", "q", "r"], counts,
                lambda i, j: [0, 1.5, -1][i] + [0, 0.5, 2][j] + (2.5 if (i, j) == (0, 1) else 0))
    case = two_way_case("unbalanced_3x3_interaction", df)
    assert abs(case["type2"]["A"]["ss"] - case["type3"]["A"]["ss"]) > 1e-2 * case["type3"]["A"]["ss"]
    cases.append(case)
    # 001 Table 19 layout, unbalanced: 2 sources x 4 sizes, 20-30 runs per cell.
    counts = rng.integers(20, 31, size=(2, 4)).tolist()
    df = design(rng, ["uniform", "pubchem"], ["196", "392", "784", "1568"], counts,
                lambda i, j: 1.2 * i + 0.3 * j)
    df["y"] = 0.8 + 0.03 * df["y"]
    cases.append(two_way_case("unbalanced_2x4_paper_layout", df))
    # Unbalanced with no effects at all.
    counts = [[3, 4], [6, 2], [4, 5]]
    cases.append(two_way_case("unbalanced_3x2_null", design(rng, ["a1", "a2", "a3"], ["b1", "b2"],
                                                           counts, lambda i, j: 0.0)))
    # Type II with an empty cell (3 x 3, cell (z, r) empty): interaction df 3 instead of 4.
    counts = [[3, 2, 4], [2, 5, 3], [4, 3, 0]]
    df = design(rng, ["x", "y", "z"], ["p", "q", "r"], counts, lambda i, j: i - 0.5 * j)
    case = two_way_case("type2_empty_cell", df, types=(2,), reference=rank_reference)
    assert case["type2"]["A:B"]["df"] == 3.0
    cases.append(case)
    return cases


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    write("paired_t.json", paired_cases())
    write("one_way_anova.json", one_way_cases())
    write("two_way_anova.json", two_way_cases())
