#!/usr/bin/env python3
"""Analogues of paper 001's Figs. 4 and 5: the break-even number of FL rounds R* (eq. 16).

Every R* is computed by the built `dcalign comm --json` (the library's numbers, not a Python
re-implementation). Fixed inputs are the paper's example settings (Fig. 5 caption): c = 100
users, a = 1000 anchor rows, m = 784 features, l = 100, gamma = c, q = 32 (q cancels in R*).
N is both protocols' model size (`--model-parameters`, N_DC = N_FL), as in the paper.
The paper gives no ranges; the ones used here are:

  Fig. 4   heatmaps of R* over the mean samples per user n in [10, 1e5] (log, 21 points) and
           the model parameters N in [1e4, 1e9] (log, 21 points), for p in {0.1, 0.25, 0.5, 1},
           with the contour R* = 1 in white;
  Fig. 5a  R* against N in [1e4, 1e9] (log, 41 points) for p in {0.25, 0.5, 0.75, 1}, n = 1000;
  Fig. 5b  R* against p in [0.05, 1] (39 points) for N in {1e5, 1e6, 2.5e7, 1e8}, n = 1000
           (2.5e7: the paper's ResNet-50).

Usage: plot_break_even.py [--dcalign build/src/cli/dcalign] [--out experiments/results/comm]
Writes fig4_break_even_heatmaps.png, fig5a_break_even_vs_parameters.png,
fig5b_break_even_vs_participation.png and break_even.csv (every value plotted).
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXED = {"users": 100, "anchor-rows": 1000, "features": 784, "dim": 100, "bits": 32}

HEATMAP_P = (0.1, 0.25, 0.5, 1.0)
HEATMAP_N_SAMPLES = (10.0, 1e5, 21)
HEATMAP_PARAMETERS = (1e4, 1e9, 21)
CURVE_P = (0.25, 0.5, 0.75, 1.0)
CURVE_PARAMETERS = (1e4, 1e9, 41)
CURVE_N = (1e5, 1e6, 2.5e7, 1e8)
CURVE_MEAN_SAMPLES = 1000.0


def log_grid(lo, hi, count):
    """count points from lo to hi (both included), evenly spaced in log10."""
    if not (0 < lo < hi) or count < 2:
        raise ValueError("log_grid needs 0 < lo < hi and count >= 2")
    a, b = math.log10(lo), math.log10(hi)
    return [10 ** (a + (b - a) * k / (count - 1)) for k in range(count)]


def linear_grid(lo, hi, count):
    if not lo < hi or count < 2:
        raise ValueError("linear_grid needs lo < hi and count >= 2")
    return [lo + (hi - lo) * k / (count - 1) for k in range(count)]


def comm_args(mean_samples, model_parameters, participation, fixed=FIXED):
    """The `dcalign comm` options for one point; floats in repr form so that nothing is rounded."""
    args = ["comm"]
    for key, value in sorted(fixed.items()):
        args += ["--" + key, repr(value)]
    args += ["--mean-samples", repr(float(mean_samples)),
             "--model-parameters", repr(float(model_parameters)),
             "--participation", repr(float(participation))]
    return args


class BreakEven:
    """R* from the dcalign executable, one `dcalign comm --json` run per point."""

    def __init__(self, dcalign):
        self.dcalign = dcalign
        self.tmp = tempfile.mkdtemp(prefix="dcalign_comm_plot_")
        self.calls = 0

    def __call__(self, mean_samples, model_parameters, participation):
        path = os.path.join(self.tmp, "r.json")
        cmd = [self.dcalign] + comm_args(mean_samples, model_parameters, participation)
        cmd += ["--json", path]
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), done.returncode, done.stderr))
        self.calls += 1
        with open(path) as f:
            return json.load(f)["break_even_rounds"]

    def close(self):
        for name in os.listdir(self.tmp):
            os.remove(os.path.join(self.tmp, name))
        os.rmdir(self.tmp)


def compute(r_star):
    """Every value of the three figures, as rows (figure, p, mean_samples, N, R*)."""
    rows = []
    for p in HEATMAP_P:
        for n in log_grid(*HEATMAP_N_SAMPLES):
            for N in log_grid(*HEATMAP_PARAMETERS):
                rows.append(("fig4", p, n, N, r_star(n, N, p)))
    for p in CURVE_P:
        for N in log_grid(*CURVE_PARAMETERS):
            rows.append(("fig5a", p, CURVE_MEAN_SAMPLES, N, r_star(CURVE_MEAN_SAMPLES, N, p)))
    for N in CURVE_N:
        for p in linear_grid(0.05, 1.0, 39):
            rows.append(("fig5b", p, CURVE_MEAN_SAMPLES, N, r_star(CURVE_MEAN_SAMPLES, N, p)))
    return rows


def select(rows, figure, **match):
    keys = {"p": 1, "n": 2, "N": 3}
    return [r for r in rows if r[0] == figure and all(r[keys[k]] == v for k, v in match.items())]


def plot(rows, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    ns, Ns = log_grid(*HEATMAP_N_SAMPLES), log_grid(*HEATMAP_PARAMETERS)
    values = [r[4] for r in rows if r[0] == "fig4"]
    norm = LogNorm(vmin=min(values), vmax=max(values))
    fig, axes = plt.subplots(1, len(HEATMAP_P), figsize=(4.2 * len(HEATMAP_P), 3.9),
                             constrained_layout=True)
    for ax, p in zip(axes, HEATMAP_P):
        cell = {(r[2], r[3]): r[4] for r in select(rows, "fig4", p=p)}
        grid = [[cell[(n, N)] for n in ns] for N in Ns]  # rows: N, columns: n
        mesh = ax.pcolormesh(ns, Ns, grid, norm=norm, shading="nearest", cmap="viridis")
        flat = [v for line in grid for v in line]
        if min(flat) < 1.0 < max(flat):
            ax.contour(ns, Ns, grid, levels=[1.0], colors="white", linewidths=2)
        else:  # R* > 1/(2p) >= 1 for p <= 1/2: DC never wins in a single FL round
            ax.text(0.03, 0.95, "R* > 1/(2p) = %g: no R* = 1" % (1 / (2 * p)), color="white",
                    transform=ax.transAxes, va="top")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("mean samples per user n")
        ax.set_title("p = %g" % p)
    axes[0].set_ylabel("model parameters N")
    fig.colorbar(mesh, ax=axes, label="break-even rounds R* (white: R* = 1)")
    fig.suptitle("R* (eq. 16), c = 100, a = 1000, m = 784, l = 100, gamma = c")
    fig.savefig(os.path.join(out, "fig4_break_even_heatmaps.png"), dpi=120)
    plt.close(fig)

    line_figure(out, "fig5a_break_even_vs_parameters.png",
                [("p = %g" % p, [(r[3], r[4]) for r in select(rows, "fig5a", p=p)])
                 for p in CURVE_P],
                "model parameters N", True,
                "R* against N (n = 1000, a = 1000, m = 784, l = 100, gamma = c)")
    line_figure(out, "fig5b_break_even_vs_participation.png",
                [("N = %.2g" % N, [(r[1], r[4]) for r in select(rows, "fig5b", N=N)])
                 for N in CURVE_N],
                "participation fraction p", False,
                "R* against p (n = 1000, a = 1000, m = 784, l = 100, gamma = c)")


def line_figure(out, name, curves, xlabel, xlog, title):
    """One panel of R* curves [(label, [(x, R*), ...]), ...] with the R* = 1 line, as a PNG."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4.2), constrained_layout=True)
    for label, pts in curves:
        ax.plot([x for x, _ in pts], [y for _, y in pts], label=label)
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1)
    if xlog:
        ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("break-even rounds R*")
    ax.set_title(title, fontsize=10)
    ax.legend()
    fig.savefig(os.path.join(out, name), dpi=120)
    plt.close(fig)


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["figure", "participation", "mean_samples", "model_parameters", "break_even"])
        for r in rows:
            w.writerow([r[0], repr(r[1]), repr(r[2]), repr(r[3]), repr(r[4])])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dcalign", default=os.path.join(ROOT, "build", "src", "cli", "dcalign"))
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results", "comm"))
    args = ap.parse_args(argv)
    if not os.access(args.dcalign, os.X_OK):
        sys.exit("plot_break_even: %s is not an executable (build dcalign, or pass --dcalign)"
                 % args.dcalign)
    os.makedirs(args.out, exist_ok=True)
    r_star = BreakEven(args.dcalign)
    try:
        rows = compute(r_star)
    finally:
        r_star.close()
    write_csv(rows, os.path.join(args.out, "break_even.csv"))
    plot(rows, args.out)
    print("plot_break_even: %d dcalign runs, figures in %s" % (r_star.calls, args.out))


if __name__ == "__main__":
    main()
