#!/usr/bin/env python3
"""Paper 004's box plots (Figs. 4-12: ROC-AUC per method, one figure per dataset and model) from
the committed per-trial records of the NRI-DC runs (experiments/results/<name>.csv).

Each box is drawn from the trial values of one method, as pandas' describe() in the tables
(`<name>.md`) summarises them: quartiles by linear interpolation, whiskers at the last values
within 1.5 IQR of the box (Tukey, matplotlib's and seaborn's default), points beyond as outliers.
The numbers drawn are also written to `<out>/README.md`, so a figure can be checked against its
table without reading pixels.

    python3 experiments/boxplots_004.py [--results experiments/results] [--out DIR]
"""
import argparse
import csv
import os
import sys

# (figure of paper 004, result name, dataset label, model label). Heart disease: the emulation
# of the paper's 1025-row file (the comparison of record, experiments/results/README.md);
# German credit stands in for CreditRating_Historical (not comparable with the paper's values).
FIGURES = [
    (4, "pima_004_table1", "Pima (PID)", "logistic regression"),
    (5, "pima_004_table2", "Pima (PID)", "MLP"),
    (6, "pima_004_table3", "Pima (PID)", "random forest"),
    (7, "heart_004_table5_duplicated", "Heart disease (HD, duplication emulated)",
     "logistic regression"),
    (8, "heart_004_table6_duplicated", "Heart disease (HD, duplication emulated)", "MLP"),
    (9, "heart_004_table7_duplicated", "Heart disease (HD, duplication emulated)",
     "random forest"),
    (10, "german_004_table9", "German credit (stand-in for CRH)", "logistic regression"),
    (11, "german_004_table10", "German credit (stand-in for CRH)", "MLP"),
    (12, "german_004_table11", "German credit (stand-in for CRH)", "random forest"),
]

# The paper's order and names of the methods.
METHODS = [("central", "Central"), ("local", "Local"), ("imakura", "LS"), ("kawakami", "GEP"),
           ("opp", "OPP"), ("gopp", "GOPP"), ("rdp-ls", "RDP-LS"), ("rdp-opp", "RDP-OPP")]


def read_values(path, metric="roc_auc"):
    """{method: [value per trial, in trial order]} of one metric."""
    values = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["metric"] != metric:
                continue
            values.setdefault(row["method"], []).append((int(row["trial"]), float(row["value"])))
    return {m: [v for _, v in sorted(tv)] for m, tv in values.items()}


def quantile(sorted_values, q):
    """Linear interpolation between closest ranks (numpy's and pandas' default)."""
    n = len(sorted_values)
    pos = q * (n - 1)
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def box_stats(values):
    """The numbers a Tukey box plot draws for `values`."""
    s = sorted(values)
    q1, med, q3 = quantile(s, 0.25), quantile(s, 0.5), quantile(s, 0.75)
    iqr = q3 - q1
    inside = [v for v in s if q1 - 1.5 * iqr <= v <= q3 + 1.5 * iqr]
    return {"n": len(s), "q1": q1, "median": med, "q3": q3, "whisker_lo": min(inside),
            "whisker_hi": max(inside), "outliers": len(s) - len(inside)}


def plot(values, title, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    present = [(key, label) for key, label in METHODS if key in values]
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    ax.boxplot([values[key] for key, _ in present], whis=1.5, widths=0.6,
               flierprops={"marker": "o", "markersize": 3, "alpha": 0.6})
    ax.set_xticks(range(1, len(present) + 1), [label for _, label in present])
    ax.set_ylabel("ROC-AUC")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return present


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(here, "results"))
    ap.add_argument("--out", default=os.path.join(here, "results", "004_boxplots"))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    lines = ["# Paper 004 Figs. 4-12: ROC-AUC box plots from the committed trials", "",
             "Written by `experiments/boxplots_004.py` from `experiments/results/<name>.csv`; "
             "quartiles by linear interpolation, whiskers at 1.5 IQR (Tukey).", ""]
    for number, name, dataset, model in FIGURES:
        csv_path = os.path.join(args.results, name + ".csv")
        if not os.path.exists(csv_path):
            print(f"boxplots_004: {csv_path} not found; Fig. {number} skipped", file=sys.stderr)
            continue
        values = read_values(csv_path)
        png = f"fig{number:02d}_{name}.png"
        present = plot(values, f"Fig. {number}: {model}, {dataset}", os.path.join(args.out, png))
        lines += [f"## Fig. {number}: {model}, {dataset} (`{name}`)", "", f"![]({png})", "",
                  "| method | trials | Q1 | median | Q3 | whiskers | outliers |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for key, label in present:
            b = box_stats(values[key])
            lines.append(f"| {label} | {b['n']} | {b['q1']:.3f} | {b['median']:.3f} | "
                         f"{b['q3']:.3f} | {b['whisker_lo']:.3f}-{b['whisker_hi']:.3f} | "
                         f"{b['outliers']} |")
        lines.append("")
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"boxplots_004: wrote {args.out}/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
