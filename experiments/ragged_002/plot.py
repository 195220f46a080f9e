#!/usr/bin/env python3
"""Figure and summary of paper 002's Type 1 layout with users of different latent dimensions
(experiments/ragged_002, issue 33 item 3).

Reads the ragged_002_<dataset>_<variant>.json results in DIR, where the variants are
  mixed_d20  l_i drawn from {20, 30, 50}, aligned into dim = 20
  mixed_d40  l_i drawn from {20, 30, 50}, aligned into dim = 40
  equal_l20  every user at l = 20
  equal_l50  every user at l = 50
and writes
  ragged_002_<dataset>.png    accuracy against the number of users, one panel per model (the
                              network, k-NN): DC with Imakura-DC and Kawakami-DC under each
                              variant, Central and Individual; means with 95% CI bands
  ragged_002_summary.md       every mean with its 95% half-width, the users' l_i per point
                              (the mean of the trials' mean, smallest and largest l_i), and the
                              mixed variants' differences from the equal-l references

Usage: experiments/ragged_002/plot.py DIR
"""
import glob
import json
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from compare_paper import mean_ci  # noqa: E402  (mean and Student t 95% half-width)

VARIANTS = [("mixed_d20", "l_i from {20, 30, 50}, dim 20", "-"),
            ("mixed_d40", "l_i from {20, 30, 50}, dim 40", "-."),
            ("equal_l20", "all l = 20", ":"),
            ("equal_l50", "all l = 50", "--")]
METHODS = [("imakura", "Imakura-DC"), ("kawakami", "Kawakami-DC")]
MODELS = [("mlp", "NN (512-128)"), ("knn", "k-NN (k = 5)")]


def users_of(point):
    m = re.search(r"users=(\d+)", point)
    return int(m.group(1)) if m else 0


def load(out_dir):
    """{dataset: {variant: {(users, method, model, metric): [values]}}} and wall times."""
    data = defaultdict(dict)
    walls = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "ragged_002_*.json"))):
        name = os.path.basename(path)[len("ragged_002_"):-len(".json")]
        dataset, _, variant = name.rpartition("_")
        dataset, _, head = dataset.rpartition("_")
        variant = head + "_" + variant
        with open(path) as f:
            doc = json.load(f)
        cells = defaultdict(list)
        for r in doc["records"]:
            cells[(users_of(r["point"]), r["method"], r["model"], r["metric"])].append(r["value"])
        data[dataset][variant] = cells
        walls[(dataset, variant)] = (doc["wall_seconds"], doc["config"]["trials"])
    return data, walls


def figure(dataset, variants, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(MODELS), figsize=(12, 4.6), sharey=True)
    colours = {"imakura": "tab:blue", "kawakami": "tab:orange"}
    any_cells = next(iter(variants.values()))
    users = sorted({k[0] for k in any_cells})
    for ax, (model, model_label) in zip(axes, MODELS):
        for variant, label, style in VARIANTS:
            cells = variants.get(variant)
            if not cells:
                continue
            for method, method_label in METHODS:
                ms = [mean_ci(cells[(u, method, model, "accuracy")]) for u in users]
                mean = [100 * m for m, _ in ms]
                half = [100 * h for _, h in ms]
                ax.plot(users, mean, style, color=colours[method], marker="o", markersize=3,
                        label=f"{method_label}, {label}")
                ax.fill_between(users, [m - h for m, h in zip(mean, half)],
                                [m + h for m, h in zip(mean, half)], color=colours[method],
                                alpha=0.08)
        for method, label, colour in [("central", "Centralized", "black"),
                                      ("local", "Individual", "grey")]:
            ms = [mean_ci(any_cells[(u, method, model, "accuracy")]) for u in users]
            ax.plot(users, [100 * m for m, _ in ms], ":", color=colour, marker="s", markersize=3,
                    label=label)
        ax.set_title(f"{dataset}: {model_label}")
        ax.set_xlabel("number of users (100 samples each)")
        ax.set_xticks(users)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (%), mean and 95% CI")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = os.path.join(out_dir, f"ragged_002_{dataset}.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def fmt(values):
    m, h = mean_ci(values)
    return f"{100 * m:.1f} ± {100 * h:.1f}"


def summary(data, walls):
    lines = ["# Paper 002 Type 1 with users of different latent dimensions", "",
             "Written by `experiments/ragged_002/plot.py`. Accuracy (%) on the 1000 test images "
             "held by user 1: mean ± 95% half-width (Student t) over the trials. DiffSpan-Orth "
             "bases; DC cells are Imakura-DC / Kawakami-DC.", ""]
    for dataset, variants in sorted(data.items()):
        lines.append(f"## {dataset}")
        lines.append("")
        for variant, label, _ in VARIANTS:
            if (dataset, variant) in walls:
                wall, trials = walls[(dataset, variant)]
                lines.append(f"- `{variant}` ({label}): {trials} trials per point, "
                             f"wall time {wall:.0f} s")
        lines.append("")
        users = sorted({k[0] for k in next(iter(variants.values()))})
        for model, model_label in MODELS:
            lines.append(f"### {model_label}")
            lines.append("")
            header = "| users | " + " | ".join(label for v, label, _ in VARIANTS if v in variants)
            lines.append(header + " | Central | Individual |")
            lines.append("|---" * (header.count("|") + 2) + "|")
            for u in users:
                row = [str(u)]
                for variant, _, _ in VARIANTS:
                    cells = variants.get(variant)
                    if cells is None:
                        continue
                    row.append(" / ".join(fmt(cells[(u, m, model, "accuracy")])
                                          for m, _ in METHODS))
                ref = next(iter(variants.values()))
                row.append(fmt(ref[(u, "central", model, "accuracy")]))
                row.append(fmt(ref[(u, "local", model, "accuracy")]))
                lines.append("| " + " | ".join(row) + " |")
            lines.append("")
        lines.append("### The users' l_i (mixed variants; mean over trials)")
        lines.append("")
        lines.append("| users | mean l_i | smallest | largest |")
        lines.append("|---|---|---|---|")
        mixed = variants.get("mixed_d20") or variants.get("mixed_d40")
        if mixed:
            for u in users:
                vals = [mean_ci(mixed[(u, "dims", "-", k)])[0]
                        for k in ("user_dim_mean", "user_dim_min", "user_dim_max")]
                lines.append(f"| {u} | {vals[0]:.1f} | {vals[1]:.1f} | {vals[2]:.1f} |")
        lines.append("")
        lines.append("### Mixed against equal l (points; DC mean differences, NN)")
        lines.append("")
        lines.append("| users | method | mixed d20 - all 20 | mixed d40 - all 50 | "
                     "mixed d40 - all 20 |")
        lines.append("|---|---|---|---|---|")
        for u in users:
            for m, m_label in METHODS:
                def mean(v):
                    cells = variants.get(v)
                    return mean_ci(cells[(u, m, "mlp", "accuracy")])[0] if cells else float("nan")
                lines.append(
                    f"| {u} | {m_label} | {100 * (mean('mixed_d20') - mean('equal_l20')):+.1f} | "
                    f"{100 * (mean('mixed_d40') - mean('equal_l50')):+.1f} | "
                    f"{100 * (mean('mixed_d40') - mean('equal_l20')):+.1f} |")
        lines.append("")
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    data, walls = load(out_dir)
    if not data:
        sys.exit(f"no ragged_002_*.json in {out_dir}")
    for dataset, variants in data.items():
        print(figure(dataset, variants, out_dir))
    path = os.path.join(out_dir, "ragged_002_summary.md")
    with open(path, "w") as f:
        f.write(summary(data, walls))
    print(path)


if __name__ == "__main__":
    main()
