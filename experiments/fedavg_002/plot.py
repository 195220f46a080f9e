#!/usr/bin/env python3
"""Figures and ordering checks of paper 002's Type 1 / Type 2 runs (experiments/fedavg_002).

Reads the fedavg_002_*.json results in DIR and writes, per dataset and type:
  fedavg_002_<dataset>_<type>.png   accuracy against users (Type 1) or samples per user (Type 2):
                                    left, the network (DC with Imakura-DC and ODC, FedAvg 1E32B and
                                    3E32B, Central, Individual); right, DC with kNN and SVM beside
                                    DC-NN and Individual; means with 95% CI bands (Student t)
  fedavg_002_rounds.png             FedAvg's training and test accuracy against rounds at the
                                    largest Type 1 point of each dataset
and fedavg_002_summary.md: the mean accuracies of every point and the paper's stated orderings,
each marked as holding or not at every point.

Usage: experiments/fedavg_002/plot.py DIR
"""
import glob
import json
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from compare_paper import mean_ci  # noqa: E402  (mean and Student t 95% half-width)

# (label, method, model, style) of the lines drawn.
NETWORK = [("DC (Imakura-DC), NN", "imakura", "mlp", "-"),
           ("DC (ODC), NN", "odc", "mlp", "-"),
           ("FedAvg 1E32B", "fedavg-1E32B", "mlp", "--"),
           ("FedAvg 3E32B", "fedavg-3E32B", "mlp", "--"),
           ("Centralized, NN", "central", "mlp", ":"),
           ("Individual, NN", "local", "mlp", ":")]
OTHERS = [("DC (Imakura-DC), NN", "imakura", "mlp", "-"),
          ("DC (Imakura-DC), kNN", "imakura", "knn", "-"),
          ("DC (Imakura-DC), SVM", "imakura", "svm", "-"),
          ("Individual, kNN", "local", "knn", ":"),
          ("Individual, SVM", "local", "svm", ":")]


def summary(values):
    """Mean, 95% CI half-width (NaN for one value) and count."""
    mean, half_width = mean_ci(values)
    return mean, half_width if len(values) > 1 else float("nan"), len(values)


def load(directory):
    """{(dataset, type): {x: {(method, model): [accuracy per trial]}}}, and the round curves."""
    points = defaultdict(dict)
    rounds = {}
    for path in sorted(glob.glob(os.path.join(directory, "fedavg_002_*.json"))):
        with open(path) as f:
            j = json.load(f)
        cfg = j["config"]
        name = j["name"]
        kind = "type1" if "_type1_" in name else "type2"
        x = cfg["users"] if kind == "type1" else cfg["samples_per_user"]
        cell = defaultdict(list)
        for r in j["records"]:
            if r["metric"] == "accuracy":
                cell[(r["method"], r["model"])].append(r["value"])
        points[(cfg["dataset"], kind)][x] = (cell, j.get("wall_seconds", 0.0))
        if kind == "type1":
            rounds.setdefault(cfg["dataset"], {})[x] = j.get("rounds", [])
    return points, rounds


def mean_of(cell, method, model):
    v = cell.get((method, model))
    return summary(v)[0] if v else float("nan")


# The paper's qualitative statements (002 section 4, notes-wave2 4.3), as checks on the means.
def orderings(dataset, kind, xs, series):
    checks = []
    dc = lambda x: mean_of(series[x][0], "imakura", "mlp")
    fed1 = lambda x: mean_of(series[x][0], "fedavg-1E32B", "mlp")
    fed3 = lambda x: mean_of(series[x][0], "fedavg-3E32B", "mlp")
    ind = lambda x: mean_of(series[x][0], "local", "mlp")
    if kind == "type1":
        few = [x for x in xs if x <= 3]
        checks.append(("DC above FedAvg 1E32B with few users (c <= 3)",
                       [(x, dc(x) > fed1(x)) for x in few]))
        if dataset == "fashion-mnist":
            checks.append(("DC above FedAvg 1E32B throughout",
                           [(x, dc(x) > fed1(x)) for x in xs]))
        else:
            checks.append(("FedAvg 1E32B slightly above DC beyond seven users",
                           [(x, fed1(x) > dc(x)) for x in xs if x > 7]))
    else:
        if dataset == "fashion-mnist":
            checks.append(("FedAvg (both) below DC", [(x, max(fed1(x), fed3(x)) < dc(x)) for x in xs]))
    checks.append(("FedAvg 3E32B within 2 points of DC", [(x, abs(fed3(x) - dc(x)) <= 0.02) for x in xs]))
    checks.append(("DC above Individual (NN)", [(x, dc(x) > ind(x)) for x in xs if not (kind == "type1" and x == 1)]))
    for model in ("knn", "svm"):
        checks.append(("DC-%s below DC-NN and above Individual-%s" % (model, model),
                       [(x, ind_ok) for x, ind_ok in
                        ((x, mean_of(series[x][0], "local", model) < mean_of(series[x][0], "imakura", model) < dc(x))
                         for x in xs if not (kind == "type1" and x == 1))]))
    return checks


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    points, rounds = load(directory)
    if not points:
        sys.exit("no fedavg_002_*.json results in " + directory)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    md = ["# Paper 002, Type 1 and Type 2: DC against FedAvg", "",
          "Means over trials of the test accuracy (%) on 1000 samples held by user 1. "
          "Written by experiments/fedavg_002/plot.py.", ""]
    for (dataset, kind), series in sorted(points.items()):
        xs = sorted(series)
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, lines, title in ((axes[0], NETWORK, "network (512-128)"),
                                 (axes[1], OTHERS, "kNN and SVM on DC")):
            for label, method, model, style in lines:
                stats = [summary(series[x][0][(method, model)]) if (method, model) in series[x][0]
                         else (float("nan"), float("nan"), 0) for x in xs]
                m = [100 * s[0] for s in stats]
                hw = [100 * s[1] if not math.isnan(s[1]) else 0 for s in stats]
                ax.plot(xs, m, style, marker="o", ms=3, label=label)
                ax.fill_between(xs, [a - b for a, b in zip(m, hw)], [a + b for a, b in zip(m, hw)],
                                alpha=0.15)
            ax.set_xlabel("users" if kind == "type1" else "samples per user")
            ax.set_ylabel("accuracy (%)")
            ax.set_title("%s, %s: %s" % (dataset, "Type 1" if kind == "type1" else "Type 2", title))
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        trials = max(len(v) for x in xs for v in series[x][0].values())
        fig.suptitle("mean and 95%% CI over %d trial(s)" % trials, fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(directory, "fedavg_002_%s_%s.png" % (dataset.replace("-", "_"), kind)),
                    dpi=120)
        plt.close(fig)

        header = ["users" if kind == "type1" else "n_i"] + [l for l, *_ in NETWORK] + \
            ["DC kNN", "DC SVM", "Ind. kNN", "Ind. SVM", "trials", "wall s"]
        md += ["## %s, %s" % (dataset, "Type 1 (100 samples per user)" if kind == "type1"
                              else "Type 2 (5 users)"), "",
               "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for x in xs:
            cell, wall = series[x]
            vals = [mean_of(cell, m, mo) for _, m, mo, _ in NETWORK] + \
                [mean_of(cell, "imakura", "knn"), mean_of(cell, "imakura", "svm"),
                 mean_of(cell, "local", "knn"), mean_of(cell, "local", "svm")]
            n = max(len(v) for v in cell.values())
            md.append("| %d | " % x + " | ".join("%.1f" % (100 * v) for v in vals) +
                      " | %d | %.0f |" % (n, wall))
        md += ["", "Orderings stated by the paper, checked on the means:", ""]
        for text, results in orderings(dataset, kind, xs, series):
            held = [x for x, ok in results if ok]
            failed = [x for x, ok in results if not ok]
            verdict = "no point to check" if not results else "holds at every point" if not failed else (
                "holds at %s; not at %s" % (held or "none", failed))
            md.append("- %s: %s." % (text, verdict))
        md.append("")

    if rounds:
        fig, axes = plt.subplots(1, len(rounds), figsize=(6 * len(rounds), 4.2), squeeze=False)
        for ax, (dataset, per_x) in zip(axes[0], sorted(rounds.items())):
            x = max(per_x)
            curves = defaultdict(lambda: defaultdict(list))
            for r in per_x[x]:
                curves[r["method"]]["train"].append((r["round"], r["train_accuracy"]))
                curves[r["method"]]["test"].append((r["round"], r["test_accuracy"]))
            for method, kinds in sorted(curves.items()):
                for what, style in (("train", "-"), ("test", "--")):
                    by_round = defaultdict(list)
                    for rnd, v in kinds[what]:
                        by_round[rnd].append(v)
                    rs = sorted(by_round)
                    ax.plot(rs, [100 * sum(by_round[r]) / len(by_round[r]) for r in rs], style,
                            label="%s, %s" % (method, what))
            ax.set_xlabel("round")
            ax.set_ylabel("accuracy (%)")
            ax.set_title("%s, Type 1, %d users: FedAvg per round (mean over trials)" % (dataset, x))
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(directory, "fedavg_002_rounds.png"), dpi=120)
        plt.close(fig)
    with open(os.path.join(directory, "fedavg_002_summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("wrote figures and fedavg_002_summary.md in " + directory)


if __name__ == "__main__":
    main()
