#!/usr/bin/env python3
"""Summarises tune_rdp_eta.sh's runs: mean ROC-AUC (95% CI) and mean alignment time per eta."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from compare_paper import mean_ci  # noqa: E402


def main(out_dir, grid):
    print("# RDP penalty weight on held-apart data (seed 7, 30 trials; the tables use seed 2026)")
    print()
    print("ROC-AUC of the workers' t_i (mean ± 95% CI), logistic regression, and the mean time to")
    print("compute all G_i. `rdp_eta` is relative: eq. 24's eta = rdp_eta x sum_i ||A_i||^2 / c.")
    for base in ("pima_004_table1", "heart_004_table5_duplicated"):
        print()
        print(f"## {base}")
        print()
        print("| rdp_eta | rdp-ls | rdp-opp | rdp-ls ms | rdp-opp ms |")
        print("|---|---|---|---|---|")
        for eta in grid:
            with open(os.path.join(out_dir, f"tune_{base}_eta{eta}.json")) as f:
                res = json.load(f)
            auc, ms = {}, {}
            for m in ("rdp-ls", "rdp-opp"):
                vals = [r["value"] for r in res["records"]
                        if r["method"] == m and r["metric"] == "roc_auc"]
                secs = [r["value"] for r in res["records"]
                        if r["method"] == m and r["metric"] == "align_seconds"]
                mean, ci = mean_ci(vals)
                auc[m] = f"{mean:.4f} ± {ci:.4f}"
                ms[m] = f"{1e3 * sum(secs) / len(secs):.1f}"
            print(f"| {eta} | {auc['rdp-ls']} | {auc['rdp-opp']} | {ms['rdp-ls']} | "
                  f"{ms['rdp-opp']} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
