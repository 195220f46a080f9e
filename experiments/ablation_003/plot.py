#!/usr/bin/env python3
"""Figures and paper comparison of paper 003's Table III and Figs. 2-3 (experiments/ablation_003).

Reads from DIR (experiments/results/ablation_003):
  ablation_003_mnist_table3.json      Table III, paired design (identity against random O and R)
  ablation_003_mnist_fig2_users.json  Fig. 2, a [sweep] over users (c)
  ablation_003_mnist_fig3_dim.json    Fig. 3, a [sweep] over dim (m~)
and writes there:
  ablation_003_fig2_users.png   test accuracy against c, mean with standard-deviation error bars
  ablation_003_fig3_dim.png     test accuracy against m~, the same
  ablation_003_summary.md       Table III beside the paper's values with the paired tests; the
                                means and standard deviations of every sweep point; the
                                paper's qualitative statements on Figs. 2-3 as checks.
A missing result is skipped. Standard deviations (not CIs) throughout, as paper 003 reports.

Usage: experiments/ablation_003/plot.py DIR
"""
import json
import math
import os
import sys
from collections import defaultdict

# Paper 003 Table III: (mean, std) over 100 iterations, our method names.
TABLE3 = [("ODC-identity", "odc:identity", (0.795, 0.009)),
          ("ODC-rnd", "odc:haar", (0.793, 0.011)),
          ("DC-identity", "imakura:identity", (0.768, 0.006)),
          ("DC-rnd", "imakura:uniform", (0.704, 0.024))]

# (label, method, style) of the lines of Figs. 2-3, in the paper's legend order.
LINES = [("Centralized", "central", "k:"),
         ("Local", "local", "k--"),
         ("Imakura-DC", "imakura", "o-"),
         ("Kawakami-DC", "kawakami", "s-"),
         ("ODC", "odc", "^-")]


def mean_sd(values):
    n = len(values)
    if n == 0:
        return float("nan"), float("nan"), 0
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1)) if n > 1 else float("nan")
    return m, sd, n


def load(directory, name):
    path = os.path.join(directory, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def cells(result):
    """{(point, method): [accuracy per trial]} over the MLP accuracy records."""
    out = defaultdict(list)
    for r in result["records"]:
        if r["metric"] == "accuracy" and r["model"] == "mlp":
            out[(r.get("point", ""), r["method"])].append(r["value"])
    return out


def num(v, spec):
    """A number of the statistics, or "undefined" (null: zero variance of the differences)."""
    return "undefined" if v is None else spec % v


def fmt(m, sd):
    return "%.3f ± %.3f" % (m, sd) if not math.isnan(sd) else "%.3f" % m


def table3(result, title):
    c = cells(result)
    n_trials = max(len(v) for v in c.values())
    design = ("split, bases, anchor and model seeds of trial 1 in every trial, only O or R "
              "redrawn" if result["config"].get("redraw") == "alignment" else
              "every trial redraws the split, bases, anchor and O or R; pairs within a trial")
    out = ["## Paper 003 Table III (MNIST, c = 50, m~ = 50, SameSpan-Orth, MLP): " + title, "",
           "%d paired trials (%s); the paper: 100 iterations. Wall time %.0f s." %
           (n_trials, design, result.get("wall_seconds", float("nan"))), "",
           "| method | ours, mean ± std | paper, mean ± std | ours - paper |",
           "|---|---|---|---|"]
    means = {}
    for label, method, (pm, psd) in TABLE3:
        m, sd, n = mean_sd(c[("", method)])
        means[label] = m
        out.append("| %s | %s | %.3f ± %.3f | %+.3f |" % (label, fmt(m, sd), pm, psd, m - pm))
    out += ["", "Gaps (the checkable part of the table):", "",
            "| gap | ours | paper |", "|---|---|---|"]
    paper = {label: pm for label, _, (pm, _) in TABLE3}
    for a, b in (("ODC-identity", "ODC-rnd"), ("DC-identity", "DC-rnd"),
                 ("ODC-identity", "DC-identity"), ("ODC-rnd", "DC-rnd")):
        out.append("| %s - %s | %+.3f | %+.3f |" % (a, b, means[a] - means[b], paper[a] - paper[b]))
    tests = [s for s in result.get("statistics", []) if s["test"] == "paired-t"]
    if tests:
        out += ["", "Paired t-tests of random - identity (accuracy; t, p and d_z are undefined "
                "when every paired difference is the same):", "",
                "| compared | alternative | n | mean difference | t | df | p | d_z |",
                "|---|---|---|---|---|---|---|---|"]
        for s in tests:
            diff = (s.get("mean_a", float("nan")) - s.get("mean_b", float("nan")))
            what, _, alt = s["what"].partition(" (")
            out.append("| %s | %s | %d | %s | %s | %.0f | %s | %s |" % (
                what, alt.rstrip(")"), s["n"], "%+.4f" % diff if not math.isnan(diff) else "-",
                num(s["statistic"], "%.3f"), s["df1"], num(s["p"], "%.3g"),
                num(s["effect"], "%.2f")))
    return out


def sweep(result, key):
    """{x: {method: [values]}} of a one-key sweep."""
    c = cells(result)
    out = defaultdict(dict)
    for (point, method), values in c.items():
        x = int(dict(kv.split("=") for kv in point.split(","))[key])
        out[x][method] = values
    return out


def plot(series, key, label, title, path, plt):
    xs = sorted(series)
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for name, method, style in LINES:
        stats = [mean_sd(series[x].get(method, [])) for x in xs]
        if all(s[2] == 0 for s in stats):
            continue
        ax.errorbar(xs, [s[0] for s in stats], yerr=[0 if math.isnan(s[1]) else s[1] for s in stats],
                    fmt=style, capsize=3, markersize=4, label=name)
    n = max(len(v) for x in xs for v in series[x].values())
    ax.set_xlabel(label)
    ax.set_ylabel("test accuracy (1000 MNIST images)")
    ax.set_title("%s (%d trials per point; bars: std)" % (title, n))
    ax.set_xticks(xs)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def means_table(series, key, result):
    xs = sorted(series)
    n = max(len(v) for x in xs for v in series[x].values())
    out = ["%d trials per point, wall time %.0f s. Mean ± std of the test accuracy:" %
           (n, result.get("wall_seconds", float("nan"))), "",
           "| %s | %s |" % (key, " | ".join(l for l, _, _ in LINES)),
           "|---|" + "---|" * len(LINES)]
    for x in xs:
        row = [fmt(*mean_sd(series[x].get(m, []))[:2]) for _, m, _ in LINES]
        out.append("| %d | %s |" % (x, " | ".join(row)))
    return out


def mean_at(series, x, method):
    return mean_sd(series[x].get(method, []))[0]


def rises(series, method):
    xs = sorted(series)
    ms = [mean_at(series, x, method) for x in xs]
    ups = sum(1 for a, b in zip(ms, ms[1:]) if b > a)
    return ms[-1] > ms[0], ups, len(ms) - 1


def check(text, ok, detail):
    return "| %s | %s | %s |" % (text, "holds" if ok else "**does not hold**", detail)


def fig2_checks(s):
    xs = sorted(s)
    out = ["| statement (003 section IV-A) | ours | detail |", "|---|---|---|"]
    for name, method, _ in LINES:
        if method == "local":
            continue
        up, ups, steps = rises(s, method)
        out.append(check("%s improves with c" % name, up,
                         "%.3f at c = %d, %.3f at c = %d; %d of %d steps up" %
                         (mean_at(s, xs[0], method), xs[0], mean_at(s, xs[-1], method), xs[-1], ups,
                          steps)))
    lo = [mean_at(s, x, "local") for x in xs]
    others = [min(mean_at(s, x, m) for _, m, _ in LINES if m != "local") for x in xs]
    out.append(check("Local lags far behind the others at every c",
                     all(l < o - 0.1 for l, o in zip(lo, others)),
                     "Local %.3f-%.3f; lowest other %.3f-%.3f" % (min(lo), max(lo), min(others),
                                                                 max(others))))
    c_top = mean_at(s, xs[-1], "central")
    out.append(check("Centralized approaches about 0.96-0.97 as c grows", 0.955 <= c_top <= 0.975,
                     "%.3f at c = %d" % (c_top, xs[-1])))
    odc_best = [x for x in xs if mean_at(s, x, "odc") >= max(mean_at(s, x, "imakura"),
                                                              mean_at(s, x, "kawakami"))]
    out.append(check("ODC above Imakura-DC and Kawakami-DC", len(odc_best) == len(xs),
                     "at %d of %d points" % (len(odc_best), len(xs))))
    gaps = [mean_at(s, x, "central") - mean_at(s, x, "odc") for x in xs]
    out.append(check("ODC nearly matches Centralized (within 0.01)", max(gaps) <= 0.01,
                     "Centralized - ODC from %+.3f to %+.3f" % (min(gaps), max(gaps))))
    gi = [mean_at(s, x, "central") - mean_at(s, x, "imakura") for x in xs]
    out.append(check("Imakura-DC about 0.05 below Centralized", 0.03 <= sum(gi) / len(gi) <= 0.07,
                     "Centralized - Imakura-DC from %+.3f to %+.3f (mean %+.3f)" %
                     (min(gi), max(gi), sum(gi) / len(gi))))
    kw = [x for x in xs if mean_at(s, x, "kawakami") < mean_at(s, x, "imakura")]
    out.append(check("Kawakami-DC lower still (below Imakura-DC)", len(kw) == len(xs),
                     "at %d of %d points" % (len(kw), len(xs))))
    return out


def fig3_checks(s):
    xs = sorted(s)
    out = ["| statement (003 section IV-A) | ours | detail |", "|---|---|---|"]
    for name, method, _ in LINES[2:]:
        up, ups, steps = rises(s, method)
        out.append(check("%s accuracy increases with m~" % name, up,
                         "%.3f at m~ = %d, %.3f at m~ = %d; %d of %d steps up" %
                         (mean_at(s, xs[0], method), xs[0], mean_at(s, xs[-1], method), xs[-1],
                          ups, steps)))
    for name, method, _ in LINES[:2]:
        ms = [mean_at(s, x, method) for x in xs]
        out.append(check("%s does not change with m~" % name, max(ms) - min(ms) < 1e-12,
                         "range %.3f-%.3f" % (min(ms), max(ms))))
    if 50 in s:
        for name, method, _ in LINES[2:]:
            a, b, c = (mean_at(s, xs[0], method), mean_at(s, 50, method),
                       mean_at(s, xs[-1], method))
            out.append(check("%s stabilises around m~ = 50 (most of the gain by 50)" % name,
                             (b - a) > 2 * abs(c - b),
                             "%+.3f from m~ = %d to 50, %+.3f from 50 to %d" %
                             (b - a, xs[0], c - b, xs[-1])))
    order = [x for x in xs if mean_at(s, x, "odc") >= mean_at(s, x, "imakura") >=
             mean_at(s, x, "kawakami")]
    out.append(check("the order of Fig. 2 (ODC >= Imakura-DC >= Kawakami-DC)",
                     len(order) == len(xs), "at %d of %d points" % (len(order), len(xs))))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    md = ["# Paper 003 Table III and Figs. 2-3 (MNIST)", "",
          "Written by experiments/ablation_003/plot.py from the JSON results in this folder. "
          "Accuracies as fractions; mean ± sample standard deviation over the trials.", ""]
    for suffix, what in (("", "the committed design"),
                         ("_epochs1", "investigation: one training epoch, batch 32"),
                         ("_redraw_all", "investigation: redraw = \"all\"")):
        t3 = load(directory, "ablation_003_mnist_table3" + suffix)
        if t3:
            md += table3(t3, "`ablation_003_mnist_table3%s`, %s" % (suffix, what)) + [""]
    for name, key, label, title, fig, checks in (
            ("ablation_003_mnist_fig2_users", "users", "number of users c",
             "Fig. 2: m~ = 50", "ablation_003_fig2_users.png", fig2_checks),
            ("ablation_003_mnist_fig3_dim", "dim", "dimension m~",
             "Fig. 3: c = 50", "ablation_003_fig3_dim.png", fig3_checks)):
        r = load(directory, name)
        if not r:
            continue
        s = sweep(r, key)
        plot(s, key, label, title, os.path.join(directory, fig), plt)
        md += ["## Paper 003 %s (`%s`)" % (title.split(":")[0], fig), ""]
        md += means_table(s, "c" if key == "users" else "m~", r) + [""]
        md += checks(s) + [""]
    with open(os.path.join(directory, "ablation_003_summary.md"), "w") as f:
        f.write("\n".join(md))
    print("wrote", os.path.join(directory, "ablation_003_summary.md"))


if __name__ == "__main__":
    main()
