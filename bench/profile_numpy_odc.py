#!/usr/bin/env python3
"""Where the NumPy peer's ODC spends its time: the same per-user loop as numpy_peer.odc, with
the products, the SVDs and the U V^T products timed separately (a clock read per step, so the
sum is slightly above the peer's plain time). Companion of bm_odc_parts (dcalign's side).

Usage: OPENBLAS_NUM_THREADS=2 profile_numpy_odc.py [--repetitions 10] [a,l,c ...]
"""

import argparse
import statistics
import sys
import time

import numpy as np

from numpy_peer import haar_orthogonal, make_anchors


def profile(a, l, c, repetitions):
    anchors = make_anchors(a, l, c, 20240601, np.float64)
    parts = {"target": [], "products": [], "svd": [], "u_vt": [], "total": []}
    for r in range(repetitions + 1):
        rng = np.random.default_rng([20240601, 1])
        t = {k: 0.0 for k in parts}
        t0 = time.perf_counter()
        o = haar_orthogonal(l, rng, np.float64)
        target = anchors[0] @ o
        t1 = time.perf_counter()
        t["target"] = t1 - t0
        for a_i in anchors:
            s0 = time.perf_counter()
            m = a_i.T @ target
            s1 = time.perf_counter()
            u, _, vt = np.linalg.svd(m)
            s2 = time.perf_counter()
            u @ vt
            s3 = time.perf_counter()
            t["products"] += s1 - s0
            t["svd"] += s2 - s1
            t["u_vt"] += s3 - s2
        t["total"] = time.perf_counter() - t0
        if r > 0:  # the first run is the warm-up
            for k in parts:
                parts[k].append(t[k])
    return {k: statistics.median(v) for k, v in parts.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("points", nargs="*",
                    default=["1000,50,50", "20000,50,50", "1000,50,1000", "1000,950,50"])
    ap.add_argument("--repetitions", type=int, default=10)
    args = ap.parse_args(argv)
    print("| (a, l, c) | target | products | svd | U V^T | total (s, medians) |")
    print("|---|---|---|---|---|---|")
    for spec in args.points:
        a, l, c = (int(v) for v in spec.split(","))
        m = profile(a, l, c, args.repetitions)
        print(f"| ({a}, {l}, {c}) | {m['target']:.4g} | {m['products']:.4g} | {m['svd']:.4g} | "
              f"{m['u_vt']:.4g} | {m['total']:.4g} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
