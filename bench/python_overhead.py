#!/usr/bin/env python3
"""Overhead of the Python bindings: dcalign.align through Python against the C++ call.

For each run, the Python wall time around dcalign.align(...) is compared with the report's
seconds.total, the time the C++ align_resident measured for the same call; the ratio of the
medians is the binding overhead (option parsing, backend creation, the G allocation, the report's
JSON). The anchors are passed in dcalign's layout (each A[i] Fortran-ordered), so no copy is made
(report["input_copied"] is False); --layout C measures the copying path for comparison.

  python bench/python_overhead.py --a 20000 --l 50 --c 50 --runs 7
"""
import argparse
import json
import statistics
import time

import numpy as np

import dcalign


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--a", type=int, default=20000)
    ap.add_argument("--l", type=int, default=50)
    ap.add_argument("--c", type=int, default=50)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--method", default="odc")
    ap.add_argument("--layout", choices=["F", "C"], default="F")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    A = rng.standard_normal((args.c, args.a, args.l)).astype(args.dtype)
    if args.layout == "F":
        A = dcalign.as_stack(A)
    dcalign.align(A, method=args.method)  # warm-up (thread pools, page faults)
    wall, cpp, copied = [], [], set()
    for _ in range(args.runs):
        t0 = time.perf_counter()
        _, report = dcalign.align(A, method=args.method)
        wall.append(time.perf_counter() - t0)
        cpp.append(report["seconds"]["total"])
        copied.add(report["input_copied"])
    mw, mc = statistics.median(wall), statistics.median(cpp)
    print(json.dumps({
        "a": args.a, "l": args.l, "c": args.c, "method": args.method, "dtype": args.dtype,
        "layout": args.layout, "runs": args.runs, "input_copied": sorted(copied),
        "python_wall_s": wall, "cpp_total_s": cpp,
        "median_python_wall_s": mw, "median_cpp_total_s": mc,
        "ratio": mw / mc, "overhead_percent": 100.0 * (mw / mc - 1.0),
    }, indent=2))


if __name__ == "__main__":
    main()
