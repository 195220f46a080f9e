#!/usr/bin/env python3
"""Summarises the uplink runs' JSON into one Markdown table per dataset: every DC method's
accuracy under each uplink (for the model the runs trained), its change against fp64 (paired by
trial: the seeds are equal across uplinks), the uplink bytes per user and the G_i's
orthogonality error and objective.

Usage: experiments/uplink_001/summarize.py [RESULTS_DIR [TAG]] > summary.md
  RESULTS_DIR  default experiments/results/uplink_001
  TAG          the runs are RESULTS_DIR/<dataset>_table7_<TAG>_<format>.json; default "uplink"
               (experiments/uplink_mlp_001 writes "uplink_mlp")
"""
import collections
import json
import os
import statistics
import sys

FORMATS = ["fp64", "fp32", "fp16", "int8"]


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "experiments/results/uplink_001"
    tag = sys.argv[2] if len(sys.argv) > 2 else "uplink"
    for dataset in ["mnist", "fashion_mnist"]:
        runs = {}
        for fmt in FORMATS:
            p = os.path.join(root, f"{dataset}_table7_{tag}_{fmt}.json")
            if os.path.exists(p):
                runs[fmt] = load(p)
        if "fp64" not in runs:
            continue
        rec = collections.defaultdict(dict)  # (fmt, cond, method, metric) -> {trial: value}
        users = runs["fp64"]["config"]["users"]
        for fmt, r in runs.items():
            for x in r["records"]:
                rec[(fmt, x["condition"], x["method"], x["metric"])][x["trial"]] = x["value"]
        trials = runs["fp64"]["config"]["trials"]
        models = sorted({x["model"] for x in runs["fp64"]["records"] if x.get("model", "-") != "-"})
        print(f"### {dataset}: {', '.join(m.upper() for m in models)} accuracy (%) by uplink, "
              f"{trials} trials, paired against fp64 (mean difference ± its standard deviation "
              "over the trials)\n")
        print("| condition | method | " + " | ".join(FORMATS) + " | bytes per user (fp32 / fp16 / int8) |"
              " orthogonality error (int8) | objective int8 / fp32 |")
        print("|---|---|" + "---|" * len(FORMATS) + "---|---|---|")
        conds = sorted({k[1] for k in rec if k[0] == "fp64" and k[3] == "accuracy" and k[1] != "-"})
        rows = [("-", "central")] + [(cond, m) for cond in conds for m in ["imakura", "kawakami", "odc"]]
        for cond, method in rows:
            base = rec.get(("fp64", cond, method, "accuracy"))
            if not base:
                continue
            cells = []
            for fmt in FORMATS:
                v = rec.get((fmt, cond, method, "accuracy"))
                if not v:
                    cells.append("-")
                    continue
                mean = 100 * statistics.mean(v.values())
                if fmt == "fp64":
                    cells.append(f"{mean:.2f}")
                else:
                    diffs = [100 * (v[t] - base[t]) for t in v]
                    d = statistics.mean(diffs)
                    # the spread of the paired differences: the training's own noise (MLP)
                    sd = f" ± {statistics.stdev(diffs):.2f}" if len(diffs) > 1 else ""
                    cells.append(f"{mean:.2f} ({d:+.2f}{sd})")
            nbytes, orth, obj = "-", "-", "-"
            if method != "central":
                b = [rec.get((f, cond, method, "uplink_bytes")) for f in ["fp32", "fp16", "int8"]]
                if all(b):
                    nbytes = " / ".join(f"{statistics.mean(x.values()) / users:.0f}" for x in b)
                o = rec.get(("int8", cond, method, "orthogonality_error"))
                if o:
                    orth = f"{statistics.mean(o.values()):.2g}"
                o8 = rec.get(("int8", cond, method, "objective"))
                o32 = rec.get(("fp32", cond, method, "objective"))
                if o8 and o32:
                    obj = f"{statistics.mean(o8.values()):.5g} / {statistics.mean(o32.values()):.5g}"
            print(f"| {cond} | {method} | " + " | ".join(cells)
                  + f" | {nbytes} | {orth} | {obj} |")
        print()


if __name__ == "__main__":
    main()
