#!/usr/bin/env python3
"""Figures and ordering checks of paper 000's DP sweeps (experiments/dp_000, section 4, Fig. 2).

Reads the dp_000_*.json results in DIR and writes, per dataset, dp_000_<dataset>.png: accuracy
against epsilon, against l and against c (the other two at the default (8, 100, 50)), one line
per method (ODC, Imakura-DC, Kawakami-DC under DP on the released data; Central and Individual on
the raw data; Central on the noisy raw rows, paper 001's DP baseline, as a single marker at the
default point), means with 95% CI bands; and dp_000_summary.md with the means of every point and
000's orderings checked at each: ODC above Imakura-DC above Kawakami-DC, DC above Individual,
accuracy rising with epsilon and with l.

Usage: experiments/dp_000/plot.py DIR
"""
import glob
import json
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from compare_paper import mean_ci  # noqa: E402  (mean and Student t 95% half-width)

DEFAULT = {"eps": 8, "l": 100, "c": 50}
AXES = [("eps", "epsilon", "dp_epsilon"), ("l", "l (latent dimension)", "dim"),
        ("c", "c (users)", "users")]
METHODS = [("odc", "ODC (OP)"), ("imakura", "Imakura-DC (FT)"), ("kawakami", "Kawakami-DC (GE)"),
           ("central", "Central (no DP)"), ("local", "Individual (no DP)")]


def load(directory):
    """{dataset: {(axis, value): {method: [accuracy per trial]}}}, raw-noise baseline apart."""
    sweeps = defaultdict(dict)
    raw = {}
    for path in sorted(glob.glob(os.path.join(directory, "dp_000_*.json"))):
        with open(path) as f:
            j = json.load(f)
        cfg = j["config"]
        cell = defaultdict(list)
        for r in j["records"]:
            if r["metric"] == "accuracy":
                cell[r["method"]].append(r["value"])
        name = j["name"]
        if name.endswith("_raw_default"):
            raw[cfg["dataset"]] = cell
            continue
        point = {"eps": cfg["dp_epsilon"], "l": cfg["dim"], "c": cfg["users"]}
        m = re.search(r"_(eps|l|c)(\d+)$", name)
        axes = [m.group(1)] if m else ["eps", "l", "c"]  # the default point lies on all three
        for axis in axes:
            sweeps[cfg["dataset"]][(axis, point[axis])] = (cell, j.get("wall_seconds", 0.0))
    return sweeps, raw


def mean(cell, method):
    v = cell.get(method)
    return mean_ci(v)[0] if v else float("nan")


def check_orderings(points):
    """[(statement, [(axis value, holds)])] on one dataset's points."""
    at = sorted(points)
    out = [("ODC above Imakura-DC above Kawakami-DC",
            [(p, mean(points[p][0], "odc") > mean(points[p][0], "imakura") >
              mean(points[p][0], "kawakami")) for p in at]),
           ("every DC method above Individual",
            [(p, min(mean(points[p][0], m) for m in ("odc", "imakura", "kawakami")) >
              mean(points[p][0], "local")) for p in at])]
    for axis in ("eps", "l"):
        xs = sorted(v for a, v in points if a == axis)
        for method in ("odc", "imakura", "kawakami"):
            ys = [mean(points[(axis, x)][0], method) for x in xs]
            out.append(("%s rising with %s" % (method, axis),
                        [((axis, x1), y1 >= y0) for x1, y0, y1 in zip(xs[1:], ys, ys[1:])]))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    sweeps, raw = load(directory)
    if not sweeps:
        sys.exit("no dp_000_*.json results in " + directory)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    md = ["# Paper 000, DP on the released representations: the sweeps of section 4", "",
          "Means over trials of the test accuracy (%). Written by experiments/dp_000/plot.py.", ""]
    for dataset, points in sorted(sweeps.items()):
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        for ax, (axis, label, _) in zip(axes, AXES):
            xs = sorted(v for a, v in points if a == axis)
            for method, name in METHODS:
                stats = [mean_ci(points[(axis, x)][0][method]) if method in points[(axis, x)][0]
                         else (float("nan"), 0.0) for x in xs]
                m = [100 * s[0] for s in stats]
                hw = [100 * s[1] for s in stats]
                ax.plot(xs, m, "-" if method not in ("central", "local") else ":", marker="o",
                        ms=3, label=name)
                ax.fill_between(xs, [a - b for a, b in zip(m, hw)], [a + b for a, b in zip(m, hw)],
                                alpha=0.15)
            if dataset in raw and "central" in raw[dataset]:
                ax.plot([DEFAULT[axis]], [100 * mean(raw[dataset], "central")], "kx", ms=8,
                        label="Central on noisy raw rows (001)")
            if axis == "eps":
                ax.set_xscale("log", base=2)
            ax.set_xlabel(label)
            ax.set_ylabel("accuracy (%)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle("%s: DP on released data, defaults (epsilon, l, c) = (8, 100, 50)" % dataset)
        fig.tight_layout()
        fig.savefig(os.path.join(directory, "dp_000_%s.png" % dataset.replace("-", "_")), dpi=120)
        plt.close(fig)

        md += ["## " + dataset, "", "| axis | value | " + " | ".join(n for _, n in METHODS) +
               " | trials | wall s |", "|" + "---|" * (len(METHODS) + 4)]
        for (axis, x) in sorted(points):
            cell, wall = points[(axis, x)]
            n = max(len(v) for v in cell.values())
            md.append("| %s | %g | " % (axis, x) + " | ".join(
                "%.1f" % (100 * mean(cell, m)) for m, _ in METHODS) + " | %d | %.0f |" % (n, wall))
        if dataset in raw:
            md += ["", "Central on the noisy raw rows at the default point (paper 001's DP "
                   "baseline): %.1f." % (100 * mean(raw[dataset], "central"))]
        md += ["", "Orderings of paper 000, checked on the means:", ""]
        for text, results in check_orderings(points):
            failed = ["%s=%g" % p for p, ok in results if not ok]
            md.append("- %s: %s." % (text, "no point to check" if not results else
                                     "holds at every point" if not failed else
                                     "not at " + ", ".join(failed)))
        md.append("")
    with open(os.path.join(directory, "dp_000_summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("wrote figures and dp_000_summary.md in " + directory)


if __name__ == "__main__":
    main()
