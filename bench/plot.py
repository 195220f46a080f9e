#!/usr/bin/env python3
"""Figures in the layout of paper 001, Fig. 6, from dcalign_sweep JSON files.

One panel per swept parameter (in the paper's order l, a, c), log-log axes, median wall-clock
time per point with a band from the minimum to the maximum repetition. One colour per method;
dcalign solid (CPU) or dash-dotted (CUDA), peers dashed (NumPy) or dotted (PyTorch).

Usage: plot.py bench/results/cpu/sweep_l.json sweep_a.json sweep_c.json --out fig6_cpu.png
"""

import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

from analyze import load  # noqa: E402  (reads and checks a sweep file)

COLORS = {"odc": "tab:red", "imakura": "tab:blue", "kawakami": "tab:green", "gopp": "tab:purple"}
NAMES = {"odc": "ODC", "imakura": "Imakura-DC", "kawakami": "Kawakami-DC", "gopp": "GOPP"}
STYLES = {("dcalign", "cpu"): "-", ("dcalign", "cuda"): "-.", ("numpy", "cpu"): "--",
          ("torch", "cuda"): ":"}
MARKERS = {"dcalign": "o", "numpy": "s", "torch": "^"}
AXIS = {"l": "latent dimension $\\ell$", "a": "anchor size $a$", "c": "number of users $c$"}
PANEL_ORDER = ["l", "a", "c"]


def series(doc):
    """{(impl, method, backend, precision): [(x, median, min, max)]} of the successful points."""
    out = {}
    for p in doc["points"]:
        for r in p["results"]:
            if r.get("status") != "ok":
                continue
            key = (r["impl"], r["method"], r["backend"], r["precision"])
            out.setdefault(key, []).append((p["x"], r["median"], r["min"], r["max"]))
    for v in out.values():
        v.sort()
    return out


def label(key):
    impl, method, backend, precision = key
    text = f"{NAMES.get(method, method)} ({impl}"
    if backend != "cpu":
        text += f", {backend}"
    if precision != "float64":
        text += f", {precision}"
    return text + ")"


def panel(ax, doc):
    p = doc["parameters"]
    sweep = p["sweep"]
    for key, pts in sorted(series(doc).items(), key=lambda kv: (kv[0][0] != "dcalign", kv[0])):
        impl, method, backend, precision = key
        xs = [q[0] for q in pts]
        style = STYLES.get((impl, backend), "--")
        ax.plot(xs, [q[1] for q in pts], style, color=COLORS.get(method, "black"),
                marker=MARKERS.get(impl, "x"), markersize=3.5, linewidth=1.4,
                alpha=1.0 if precision == "float64" else 0.6, label=label(key))
        ax.fill_between(xs, [q[2] for q in pts], [q[3] for q in pts],
                        color=COLORS.get(method, "black"), alpha=0.12, linewidth=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    fixed = ", ".join(f"{k} = {v}" for k, v in p["fixed"].items())
    ax.set_title(f"time vs {AXIS[sweep]}\n({fixed})", fontsize=10)
    ax.set_xlabel(AXIS[sweep])
    ax.set_ylabel("median wall-clock time (s)")
    ax.grid(True, which="both", alpha=0.3)


def machine_caption(doc):
    m = doc.get("machine", {})
    cpu = m.get("cpu", {})
    numpy = m.get("peers", {}).get("numpy", {})
    blas = " ".join(m.get("openblas_config", "?").split()[:2])  # "OpenBLAS 0.3.21"
    text = (f"{cpu.get('model', '?')}, {m.get('threads', '?')} threads; {blas}; "
            f"dcalign {m.get('dcalign_version', '?')} ({str(m.get('git_commit'))[:8]})")
    if numpy:
        text += f"; NumPy {numpy.get('numpy', '?')}"
    p = doc["parameters"]
    text += f"; median of {p['repetitions']} runs after {p['warmup']} warm-up"
    return text


def figure(docs, out):
    docs = sorted(docs, key=lambda d: PANEL_ORDER.index(d["parameters"]["sweep"]))
    fig, axes = plt.subplots(1, len(docs), figsize=(5.2 * len(docs), 4.6), squeeze=False)
    for ax, doc in zip(axes[0], docs):
        panel(ax, doc)
    handles, labels = {}, {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center",
               ncol=min(len(handles), 3), fontsize=8, frameon=False)
    fig.suptitle(machine_caption(docs[0]), fontsize=8)
    rows = (len(handles) + 2) // 3
    fig.tight_layout(rect=(0, 0.04 + 0.035 * rows, 1, 0.95))
    fig.savefig(out, dpi=130)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="dcalign_sweep JSON files (one panel each)")
    ap.add_argument("--out", required=True, help="PNG to write")
    args = ap.parse_args(argv)
    docs = [load(f) for f in args.files]
    sweeps = [d["parameters"]["sweep"] for d in docs]
    if len(set(sweeps)) != len(sweeps):
        raise SystemExit("plot.py: give at most one file per swept parameter")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    figure(docs, args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
