#!/usr/bin/env python3
"""Figures and checks of paper 002's Fig. 2 runs (experiments/params_002).

Reads the params_002_*.json results in DIR and writes
  params_002_fig2.png       the three panels of 002's Fig. 2, accuracy against the number of users
                            (Type 1, 100 samples per user), means with 95% CI bands (Student t):
                            (a) DC (Imakura-DC) with the NN for each IR dimension at 500 anchors,
                            (b) the same for each anchor count at dimension 50,
                            (c) DC with NN, kNN and SVM at dimension 50 and 500 anchors, with the
                                Individual baselines of each model (and, where run, kNN and SVM on
                                standardized aligned features, which 002 does not have);
  params_002_by_value.png   DC-NN against the swept value itself at 1, 2, 5 and 10 users (and,
                            where run, on standardized aligned features, dashed);
  params_002_summary.md     every mean, the paper's stated orderings checked on the means, and the
                            dim = 50, 500-anchor point against experiments/results/fedavg_002 (same
                            seed) where those results are present.

Usage: experiments/params_002/plot.py DIR
"""
import glob
import json
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from compare_paper import mean_ci  # noqa: E402  (mean and Student t 95% half-width)

SWEPT = {"dim": "dim", "anchors": "anchor_rows", "anchors_standardized": "anchor_rows"}
TITLES = {"dim": "IR dimension (500 anchors)", "anchors": "anchor count (dimension 50)"}


def parse(point):
    return {k: int(v) for k, v in (kv.split("=") for kv in point.split(","))} if point else {}


def load(directory):
    """{family: {(value, users): {(method, model): [accuracy]}}}, wall seconds per family."""
    data, walls = {}, {}
    for path in sorted(glob.glob(os.path.join(directory, "params_002_*.json"))):
        with open(path) as f:
            j = json.load(f)
        family = j["name"][len("params_002_"):]
        fixed = None
        if family.startswith("dim_d"):  # one config per IR dimension
            family, fixed = "dim", j["config"]["dim"]
        cells = data.setdefault(family, defaultdict(lambda: defaultdict(list)))
        for r in j["records"]:
            if r["metric"] != "accuracy":
                continue
            p = parse(r.get("point", ""))
            value = fixed if fixed is not None else p.get(SWEPT.get(family, ""), None)
            cells[(value, p["users"])][(r["method"], r["model"])].append(100 * r["value"])
        walls[j["name"]] = (j.get("wall_seconds", 0.0), j["config"]["trials"], j.get("machine", ""))
    return data, walls


def stat(values):
    if not values:
        return float("nan"), 0.0
    return mean_ci(values)


def band(ax, xs, cells, key, label, style, **kw):
    s = [stat(cells[x].get(key, [])) for x in xs]
    m = [a for a, _ in s]
    hw = [b for _, b in s]
    line, = ax.plot(xs, m, style, marker="o", ms=3, label=label, **kw)
    ax.fill_between(xs, [a - b for a, b in zip(m, hw)], [a + b for a, b in zip(m, hw)],
                    alpha=0.12, color=line.get_color())


def fedavg_reference(directory):
    """{users: {(method, model): [accuracy]}} of experiments/results/fedavg_002's MNIST Type 1."""
    ref = {}
    for path in glob.glob(os.path.join(directory, "..", "fedavg_002", "fedavg_002_mnist_type1_c*.json")):
        with open(path) as f:
            j = json.load(f)
        cell = defaultdict(list)
        for r in j["records"]:
            if r["metric"] == "accuracy":
                cell[(r["method"], r["model"])].append(100 * r["value"])
        ref[j["config"]["users"]] = cell
    return ref


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    data, walls = load(directory)
    if not data:
        sys.exit("no params_002_*.json results in " + directory)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    md = ["# Paper 002 Fig. 2: IR dimension, anchor count and model (MNIST, Type 1)", "",
          "Test accuracy (%) on 1000 samples held by user 1, mean ± 95% CI half-width (Student t) "
          "over the trials; users of 100 samples each. DC is Imakura-DC on per-user SVD bases. "
          "Written by experiments/params_002/plot.py.", ""]
    for name, (wall, trials, machine) in sorted(walls.items()):
        md.append("- %s: %d trial(s), wall time %.0f s (%s)." % (name, trials, wall, machine))
    md.append("")

    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    for ax, family, letter in ((axes[0], "dim", "a"), (axes[1], "anchors", "b")):
        if family not in data:
            ax.set_title("(%s) %s: not run" % (letter, TITLES[family]))
            continue
        cells = data[family]
        values = sorted({v for v, _ in cells})
        users = sorted({u for _, u in cells})
        for v in values:
            per_user = {u: cells[(v, u)] for u in users}
            band(ax, users, per_user, ("imakura", "mlp"), "DC, NN, %s = %d" % (SWEPT[family], v), "-")
        ref_v = 50 if family == "dim" else 500
        per_user = {u: cells[(ref_v, u)] for u in users}
        band(ax, users, per_user, ("central", "mlp"), "Centralized, NN", ":", color="k")
        band(ax, users, per_user, ("local", "mlp"), "Individual, NN", "--", color="grey")
        ax.set_title("(%s) %s" % (letter, TITLES[family]))
    if "dim" in data:
        cells = data["dim"]
        users = sorted({u for _, u in cells})
        per_user = {u: cells[(50, u)] for u in users}
        std = data.get("svm_standardized")
        colors = {"mlp": "C0", "knn": "C1", "svm": "C2"}
        for model, name in (("mlp", "NN"), ("knn", "kNN (k = 5)"), ("svm", "SVM (C = 10, gamma = 0.01)")):
            band(axes[2], users, per_user, ("imakura", model), "DC, " + name, "-", color=colors[model])
            band(axes[2], users, per_user, ("local", model), "Individual, " + name.split(" ")[0], "--",
                 color=colors[model])
        if std:
            per_std = {u: std[(None, u)] for u in users}
            for model, name in (("knn", "kNN"), ("svm", "SVM")):
                band(axes[2], users, per_std, ("imakura", model),
                     "DC, %s, standardized aligned (not in 002)" % name, "-.", color=colors[model],
                     alpha=0.6)
        axes[2].set_title("(c) classifier on the DC representation (dim 50, 500 anchors)")
    for ax in axes:
        ax.set_xlabel("number of users (100 samples each)")
        ax.set_ylabel("accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6.5)
    fig.suptitle("Paper 002 Fig. 2 on MNIST, Type 1: mean and 95% CI", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "params_002_fig2.png"), dpi=120)
    plt.close(fig)

    present = [f for f in ("dim", "anchors") if f in data]
    if present:
        fig, axes = plt.subplots(1, len(present), figsize=(6 * len(present), 4.3), squeeze=False)
        for ax, family in zip(axes[0], present):
            cells = data[family]
            values = sorted({v for v, _ in cells})
            for u in (1, 2, 5, 10):
                if (values[0], u) not in cells:
                    continue
                band(ax, values, {v: cells[(v, u)] for v in values}, ("imakura", "mlp"),
                     "DC, NN, %d user(s)" % u, "-", color="C%d" % u)
                std = data.get(family + "_standardized", {})
                sv = sorted(v for v, uu in std if uu == u)
                if sv:
                    band(ax, sv, {v: std[(v, u)] for v in sv}, ("imakura", "mlp"),
                         "DC, NN, %d user(s), standardized aligned (not in 002)" % u, "--",
                         color="C%d" % u)
            ax.set_xscale("log")
            ax.set_xticks(values)
            ax.set_xticklabels([str(v) for v in values])
            ax.set_xlabel(SWEPT[family])
            ax.set_ylabel("accuracy (%)")
            ax.set_title("DC-NN against the %s" % TITLES[family])
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(directory, "params_002_by_value.png"), dpi=120)
        plt.close(fig)

    fmt = lambda v: "%.1f ± %.1f" % stat(v) if v else "-"
    mean = lambda v: stat(v)[0]
    for family, letter in (("dim", "a"), ("anchors", "b")):
        if family not in data:
            continue
        cells = data[family]
        values = sorted({v for v, _ in cells})
        users = sorted({u for _, u in cells})
        ref_v = 50 if family == "dim" else 500
        header = ["users"] + ["%s = %d" % (SWEPT[family], v) for v in values] + ["Central", "Individual"]
        md += ["## (%s) DC-NN against the %s" % (letter, TITLES[family]), "",
               "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for u in users:
            md.append("| %d | " % u + " | ".join(fmt(cells[(v, u)].get(("imakura", "mlp"))) for v in values)
                      + " | %s | %s |" % (fmt(cells[(ref_v, u)].get(("central", "mlp"))),
                                          fmt(cells[(ref_v, u)].get(("local", "mlp")))))
        mono, best = [], []
        for u in users:
            m = [mean(cells[(v, u)][("imakura", "mlp")]) for v in values]
            mono.append((u, all(b >= a for a, b in zip(m, m[1:]))))
            best.append("%d: %d" % (u, values[max(range(len(m)), key=m.__getitem__)]))
        held = [u for u, ok in mono if ok]
        md += ["", "- Means non-decreasing in %s: at users %s of %s." % (SWEPT[family], held, users),
               "- Best %s per user count: %s." % (SWEPT[family], ", ".join(best)), ""]
        # Paired by trial (common random numbers: the same data at every value).
        lo, hi = values[0], values[-1]
        diffs = []
        for u in users:
            for other in (lo, hi):
                if other == ref_v:
                    continue
                a, b = cells[(other, u)].get(("imakura", "mlp"), []), cells[(ref_v, u)].get(("imakura", "mlp"), [])
                n = min(len(a), len(b))
                if n:
                    diffs.append("%d users, %s %d minus %d: %s" % (
                        u, SWEPT[family], other, ref_v, fmt([x - y for x, y in zip(a[:n], b[:n])])))
        md += ["Paired differences of DC-NN (trial by trial, points):", ""] + \
            ["- " + d for d in diffs] + [""]
        std = data.get(family + "_standardized", {})
        if std:
            sv = sorted({v for v, _ in std})
            su = sorted({u for _, u in std})
            md += ["DC-NN with standardize_aligned = true (not in 002) beside the plain runs above, "
                   "on the trials both have (same seed, so the same data and anchors): plain / "
                   "standardized, and the standardized run's paired difference from its own %s = %d:"
                   % (SWEPT[family], ref_v), "",
                   "| users | " + " | ".join("%s = %d" % (SWEPT[family], v) for v in sv) + " |",
                   "|" + "---|" * (len(sv) + 1)]
            for u in su:
                row = []
                for v in sv:
                    st = std[(v, u)].get(("imakura", "mlp"), [])
                    n = len(st)
                    plain = cells[(v, u)].get(("imakura", "mlp"), [])[:n]
                    ref = std.get((ref_v, u), {}).get(("imakura", "mlp"), [])
                    d = " (%s)" % fmt([x - y for x, y in zip(st, ref)]) if v != ref_v and ref else ""
                    row.append("%s / %s%s" % (fmt(plain), fmt(st), d))
                md.append("| %d | " % u + " | ".join(row) + " |")
            md.append("")
        if family == "dim":
            for model in ("knn", "svm"):
                md += ["DC-%s against the IR dimension:" % model, "",
                       "| users | " + " | ".join("dim = %d" % v for v in values) + " |",
                       "|" + "---|" * (len(values) + 1)]
                for u in users:
                    md.append("| %d | " % u + " | ".join(fmt(cells[(v, u)].get(("imakura", model)))
                                                         for v in values) + " |")
                md.append("")

    if "dim" in data:
        cells = data["dim"]
        users = sorted({u for _, u in cells})
        std = data.get("svm_standardized", {})
        header = ["users", "DC NN", "DC kNN", "DC SVM", "Ind. NN", "Ind. kNN", "Ind. SVM", "Central NN"]
        if std:
            header += ["DC kNN, std.", "DC SVM, std."]
        md += ["## (c) The classifier on the DC representation (dim 50, 500 anchors)", "",
               "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for u in users:
            c = cells[(50, u)]
            row = [fmt(c.get(k)) for k in (("imakura", "mlp"), ("imakura", "knn"), ("imakura", "svm"),
                                          ("local", "mlp"), ("local", "knn"), ("local", "svm"),
                                          ("central", "mlp"))]
            if std:
                row += [fmt(std[(None, u)].get(("imakura", m))) for m in ("knn", "svm")]
            md.append("| %d | " % u + " | ".join(row) + " |")
        md += ["", "Orderings stated by 002 (users >= 2), checked on the means:", ""]
        for model in ("knn", "svm"):
            below = [u for u in users if u > 1 and
                     mean(cells[(50, u)][("imakura", model)]) < mean(cells[(50, u)][("imakura", "mlp")])]
            above_nn = [u for u in users if u > 1 and
                        mean(cells[(50, u)][("imakura", model)]) > mean(cells[(50, u)][("local", "mlp")])]
            above_own = [u for u in users if u > 1 and
                         mean(cells[(50, u)][("imakura", model)]) > mean(cells[(50, u)][("local", model)])]
            md += ["- DC-%s below DC-NN at users %s." % (model, below),
                   "- DC-%s above Individual-NN at users %s." % (model, above_nn),
                   "- DC-%s above Individual-%s at users %s." % (model, model, above_own)]
        md.append("")
        ref = fedavg_reference(directory)
        if ref:
            md += ["## The dim = 50, 500-anchor point against experiments/results/fedavg_002", "",
                   "Same config and seed (3000) without FedAvg and ODC; the largest difference of "
                   "the trial-by-trial accuracies (points) per model, DC and Individual:", "",
                   "| users | trials compared | DC NN | DC kNN | DC SVM | Ind. NN |", "|---|---|---|---|---|---|"]
            for u in users:
                if u not in ref:
                    continue
                row = []
                n = 0
                for key in (("imakura", "mlp"), ("imakura", "knn"), ("imakura", "svm"), ("local", "mlp")):
                    a, b = cells[(50, u)].get(key, []), ref[u].get(key, [])
                    n = min(len(a), len(b))
                    row.append("%.2f" % max(abs(x - y) for x, y in zip(a[:n], b[:n])) if n else "-")
                md.append("| %d | %d | " % (u, n) + " | ".join(row) + " |")
            md.append("")
    with open(os.path.join(directory, "params_002_summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("wrote params_002_fig2.png, params_002_by_value.png and params_002_summary.md in " + directory)


if __name__ == "__main__":
    main()
