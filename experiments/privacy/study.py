#!/usr/bin/env python3
"""How well the collusion attack reconstructs MNIST rows as l and a vary (issue 15 item 5).

User 1 colludes with the analyst: with the raw anchor A (a x 784) and user j's released A_j and
X~_j they form F^_j = A^+ A_j and X^_j = X~_j F^_j^+ (paper 001 section 2.2); the runner records
the median over the attacked users of ||X^_j - X_j||_F / ||X_j||_F (collusion_error) and the
epsilon-DR ratios of paper 004 eq. (3) (privacy = ["collusion", "dr"], see
include/dcalign/experiment.hpp).

Two one-at-a-time sweeps, each with and without DP on the released data (dp_target =
"released", epsilon = 8, delta = 1e-3, row range r = 1: sigma = 0.48 per entry):
  l in {784, 500, 300, 100, 50, 20} at a = 1000, and
  a in {100, 300, 784, 1000, 2000} at l = 100.
Every point: 3 users of 800 MNIST training rows (l = 784 needs n_i >= l), SameSpan-Orth and
DiffSpan-Orth bases, uniform anchor, 3 trials, seed 1 (common random numbers across points).
The runner needs a model: Local kNN on 300 test rows, cheap and not part of the study.

Steps (each skippable):
  1. write experiments/privacy/configs/privacy_*.toml (one point per file; the runner has no
     key sweeps);
  2. run each with build-privacy/src/cli/dcalign-experiment into experiments/results/privacy/runs;
  3. collect the records into experiments/results/privacy/study.csv and study.md and draw
     experiments/results/privacy/collusion_mnist.png (matplotlib).

Usage: /usr/bin/python3 experiments/privacy/study.py [--runner PATH] [--no-run]
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONFIGS = os.path.join(HERE, "configs")
RESULTS = os.path.join(ROOT, "experiments", "results", "privacy")
RUNS = os.path.join(RESULTS, "runs")

L_SWEEP = [784, 500, 300, 100, 50, 20]
A_SWEEP = [100, 300, 784, 1000, 2000]
L_AT = 1000  # a for the l sweep
A_AT = 100  # l for the a sweep
CONDITIONS = ["SameSpan-Orth", "DiffSpan-Orth"]
METRICS = ["collusion_error", "collusion_row_error", "dr_fraction_below", "dr_min_ratio",
           "dr_median_ratio"]
FLOOR = 1e-16  # the plots' lower limit

TEMPLATE = """\
# Collusion attack on MNIST (issue 15 item 5): {what}.
# Written by experiments/privacy/study.py.
name = "{name}"
dataset = "mnist"
partition = "iid"
users = 3
samples_per_user = 800
test_samples = 300
anchor_rows = {a}
anchor = "uniform"
dim = {l}
conditions = ["SameSpan-Orth", "DiffSpan-Orth"]
methods = ["local"]
models = ["knn"]
metrics = ["accuracy"]
trials = 3
seed = 1
privacy = ["collusion", "dr"]
{dp}"""


def points():
    """(name, sweep, l, a, dp) for every point; the l sweep's a = 1000, l = 100 point is shared."""
    out = []
    for dp in (False, True):
        suffix = "_dp" if dp else ""
        for l in L_SWEEP:
            out.append((f"privacy_l{l}_a{L_AT}{suffix}", "l", l, L_AT, dp))
        for a in A_SWEEP:
            if a == L_AT and A_AT in L_SWEEP:
                continue  # the same config as the l sweep's point
            out.append((f"privacy_l{A_AT}_a{a}{suffix}", "a", A_AT, a, dp))
    return out


def write_configs():
    os.makedirs(CONFIGS, exist_ok=True)
    for name, sweep, l, a, dp in points():
        what = f"l = {l}, a = {a}, " + ("DP on the released data (000 eq. 3)" if dp else "no DP")
        dp_text = ('dp_target = "released"\ndp_epsilon = 8\ndp_delta = 1e-3\ndp_row_range = 1\n'
                   if dp else "")
        with open(os.path.join(CONFIGS, name + ".toml"), "w") as f:
            f.write(TEMPLATE.format(what=what, name=name, a=a, l=l, dp=dp_text))


def run_all(runner):
    os.makedirs(RUNS, exist_ok=True)
    t0 = time.time()
    for name, *_ in points():
        cfg = os.path.relpath(os.path.join(CONFIGS, name + ".toml"), ROOT)
        print(f"[{time.time() - t0:7.1f} s] {name}", flush=True)
        subprocess.run([runner, "experiment", cfg, "--out", os.path.relpath(RUNS, ROOT)],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.time() - t0


def collect():
    rows = []
    for name, sweep, l, a, dp in points():
        with open(os.path.join(RUNS, name + ".json")) as f:
            j = json.load(f)
        for cond in CONDITIONS:
            row = {"name": name, "l": l, "a": a, "dp": int(dp), "condition": cond,
                   "wall_seconds": j["wall_seconds"]}
            for m in METRICS:
                v = [r["value"] for r in j["records"]
                     if r["method"] == "privacy" and r["condition"] == cond and r["metric"] == m]
                row[m] = sum(v) / len(v)
                row[m + "_min"], row[m + "_max"] = min(v), max(v)
            rows.append(row)
    return rows


def table(rows, sweep_key, fixed_key, fixed_value):
    sel = [r for r in rows if r[fixed_key] == fixed_value]
    values = sorted({r[sweep_key] for r in sel}, reverse=True)
    lines = [f"| {sweep_key} | " + " | ".join(
        f"{c} {'DP' if dp else 'no DP'}" for c in CONDITIONS for dp in (0, 1)) +
             " | DR ratio median (DiffSpan-Orth) |",
             "|---|" + "---|" * (2 * len(CONDITIONS) + 1)]
    for v in values:
        cells = []
        for c in CONDITIONS:
            for dp in (0, 1):
                r = [x for x in sel if x[sweep_key] == v and x["condition"] == c and x["dp"] == dp]
                cells.append(f"{r[0]['collusion_error']:.3g}" if r else "-")
        d = [x for x in sel if x[sweep_key] == v and x["condition"] == "DiffSpan-Orth"
             and x["dp"] == 0]
        cells.append(f"{d[0]['dr_median_ratio']:.3g}" if d else "-")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {("SameSpan-Orth", 0): ("C0", "-o"), ("DiffSpan-Orth", 0): ("C1", "-s"),
              ("SameSpan-Orth", 1): ("C0", "--o"), ("DiffSpan-Orth", 1): ("C1", "--s")}
    for ax, (key, fixed_key, fixed, xlabel) in zip(axes, [
            ("l", "a", L_AT, f"latent dimension l (a = {L_AT})"),
            ("a", "l", A_AT, f"anchor rows a (l = {A_AT})")]):
        for (cond, dp), (color, fmt) in styles.items():
            sel = sorted((r for r in rows if r[fixed_key] == fixed and r["condition"] == cond
                          and r["dp"] == dp), key=lambda r: r[key])
            x = [r[key] for r in sel]
            # A log axis: the exact recovery at l = m (about 1e-14) is drawn at its value.
            y = [max(r["collusion_error"], FLOOR) for r in sel]
            lo = [y[k] - max(r["collusion_error_min"], FLOOR) for k, r in enumerate(sel)]
            hi = [max(r["collusion_error_max"], FLOOR) - y[k] for k, r in enumerate(sel)]
            ax.errorbar(x, y, yerr=[lo, hi], fmt=fmt, color=color, capsize=2, markersize=4,
                        label=f"{cond}, {'DP eps = 8' if dp else 'no DP'}")
        if key == "a":
            ax.axvline(784, color="grey", lw=0.8, ls=":")
            ax.text(800, 2e-2, "a = m = 784", color="grey", fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(FLOOR if key == "l" else 1e-2, 1e3)
        ticks = L_SWEEP if key == "l" else A_SWEEP
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.axhline(1, color="grey", lw=0.8, ls=":")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("relative reconstruction error ||X^ - X||_F / ||X||_F")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Collusion attack X^_j = X~_j (A^+ A_j)^+ on MNIST (3 users x 800 rows, "
                 "median over attacked users, mean of 3 trials; bars: min-max)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runner", default=os.path.join(ROOT, "build-privacy", "src", "cli",
                                                     "dcalign-experiment"))
    p.add_argument("--no-run", action="store_true", help="only collect and plot existing runs")
    args = p.parse_args()
    write_configs()
    if not args.no_run:
        wall = run_all(args.runner)
        print(f"all runs: {wall:.0f} s wall")
    rows = collect()
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "study.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(RESULTS, "study.md"), "w") as f:
        f.write("Collusion error ||X^_j - X_j||_F / ||X_j||_F (median over the 2 attacked users, "
                "mean of 3 trials).\n\n")
        f.write(f"### As l falls, a = {L_AT}\n\n" + table(rows, "l", "a", L_AT) + "\n\n")
        f.write(f"### As a varies, l = {A_AT}\n\n" + table(rows, "a", "l", A_AT) + "\n")
    plot(rows, os.path.join(RESULTS, "collusion_mnist.png"))
    print(open(os.path.join(RESULTS, "study.md")).read())


if __name__ == "__main__":
    sys.exit(main())
