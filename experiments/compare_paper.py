#!/usr/bin/env python3
"""Compares a `dcalign experiment` result (JSON) with the published means of paper 001, Table 7.

Usage: experiments/compare_paper.py RESULT.json [--tolerance 2.0] [--out FILE.md]

Prints a Markdown table: one row per (model, condition, method) cell with our mean, the
half-width of its 95% confidence interval (Student t over the trials), the paper's mean, the
difference in percentage points, and a mark where |difference| exceeds the tolerance.
Exit status 0 either way: the table is a report, not a test.
"""
import argparse
import json
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from analyze import t_quantile  # noqa: E402  (the sweep analysis' Student t quantile)

CONDITIONS = ["SameSpan-Orth", "SameSpan", "DiffSpan-Orth", "DiffSpan"]
DC_METHODS = ["imakura", "kawakami", "odc"]

# Paper 001, Table 7: accuracy (%) as imakura / kawakami / odc per condition, then Central, Local.
TABLE7 = {
    ("mnist", "svm"): ([(96.1, 96.1, 95.6), (96.1, 96.1, 88.8), (95.1, 94.7, 94.9),
                        (94.9, 94.7, 86.5)], 96.0, 66.0),
    ("mnist", "mlp"): ([(96.0, 95.9, 95.9), (95.9, 95.8, 92.6), (94.4, 93.2, 95.3),
                        (94.9, 93.2, 91.2)], 95.1, 59.7),
    ("fashion-mnist", "svm"): ([(85.4, 85.4, 83.7), (85.4, 85.4, 77.7), (83.4, 83.0, 82.5),
                                (82.9, 83.0, 76.3)], 86.1, 62.9),
    ("fashion-mnist", "mlp"): ([(86.1, 86.0, 86.0), (86.1, 85.9, 80.5), (81.8, 81.5, 84.3),
                                (82.5, 81.5, 78.8)], 86.1, 61.1),
}

def paper_cells(dataset, model):
    """{(condition, method): paper mean} for one dataset and model; empty if not in Table 7."""
    entry = TABLE7.get((dataset, model))
    if entry is None:
        return {}
    per_condition, central, local = entry
    cells = {("-", "central"): central, ("-", "local"): local}
    for cond, values in zip(CONDITIONS, per_condition):
        for method, v in zip(DC_METHODS, values):
            cells[(cond, method)] = v
    return cells


def mean_ci(values):
    """Mean and half-width of the 95% t interval (0 for a single value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, t_quantile(0.975, n - 1) * math.sqrt(var / n)


def compare(result, tolerance=2.0):
    """Rows (model, condition, method, ours, ci, paper, delta, flagged) for accuracy records."""
    dataset = result["config"]["dataset"]
    values = defaultdict(list)
    for r in result["records"]:
        if r["metric"] == "accuracy":
            values[(r["model"], r["condition"], r["method"])].append(100.0 * r["value"])
    rows = []
    for (model, cond, method), vals in sorted(values.items()):
        paper = paper_cells(dataset, model).get((cond, method))
        if paper is None:
            continue
        mean, ci = mean_ci(vals)
        delta = mean - paper
        rows.append((model, cond, method, mean, ci, paper, delta, abs(delta) > tolerance))
    return rows


def markdown(result, rows, tolerance):
    trials = result["config"]["trials"]
    out = [f"Comparison with paper 001 Table 7 ({result['config']['dataset']}, {trials} trials "
           f"here; the paper averages 100). Marked: |ours - paper| > {tolerance} pp.", "",
           "| model | condition | method | ours (mean ± 95% CI) | paper | ours - paper | |",
           "|---|---|---|---|---|---|---|"]
    for model, cond, method, mean, ci, paper, delta, flagged in rows:
        mark = f"**>{tolerance:g}**" if flagged else ""
        out.append(f"| {model} | {cond} | {method} | {mean:.1f} ± {ci:.1f} | {paper:.1f} | "
                   f"{delta:+.1f} | {mark} |")
    flagged = sum(1 for r in rows if r[7])
    out += ["", f"{len(rows) - flagged} of {len(rows)} cells within {tolerance} pp."]
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("result")
    p.add_argument("--tolerance", type=float, default=2.0)
    p.add_argument("--out")
    a = p.parse_args(argv)
    with open(a.result) as f:
        result = json.load(f)
    rows = compare(result, a.tolerance)
    if not rows:
        sys.exit(f"compare_paper: {a.result} holds no accuracy cell of Table 7 "
                 f"(dataset {result['config']['dataset']!r}); expected mnist or fashion-mnist")
    text = markdown(result, rows, a.tolerance)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
