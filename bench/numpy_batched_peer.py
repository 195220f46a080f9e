#!/usr/bin/env python3
"""ODC (paper 001, Alg. 4) in batched NumPy, as a NumPy user writes it at its best.

The anchors are one array A of shape (c, a, l), loaded from the same .npy file that
`dcalign align --anchors` reads (untimed). One timed run of `batched_odc` is

    O = Haar orthogonal l x l       (QR of a Gaussian from a generator seeded by --seed,
                                     signs of diag(R) moved into Q; the generator is created
                                     outside the clock, the draw is inside, as dcalign's is)
    T = A[0] @ O                    (the target; reference user 0)
    M = A_i^T T for all i at once   (np.einsum('kai,aj->kij', A, T, optimize=True),
                                     np.matmul(A.transpose(0, 2, 1), T), or one GEMM
                                     (W.T @ T).reshape(c, l, l) over W = [A_1 ... A_c], formed
                                     once untimed: whichever was fastest)
    U, S, Vt = np.linalg.svd(M)     (one batched call)
    G = U @ Vt                      (batched matmul)

`gemm_floor` times the products W^T Z alone (the chosen form with T already formed):
the one product every ODC implementation has to do, the floor for dcalign's alignment.

Which product form is used: each is run once untimed (warm-up) and then once timed at start,
before the warm-up runs; the fastest is used for every later run, and the probe times, the
choice and the largest difference between their results are in the JSON.

Usage:
  numpy_batched_peer.py --anchors FILE [--warmup 1] [--repetitions 5] [--seed 20240601]
                        [--json OUT] [--step-stdin] [--settle 0.25]
  numpy_batched_peer.py --describe          versions and BLAS only (no anchors)

Without --json the JSON goes to stdout. With --step-stdin (used by bench/run_odc_vs_numpy_batched.sh to
interleave with dcalign runs) the peer loads, probes and warms up, prints "ready", and then
before each repetition waits for one line on stdin; after each repetition it sleeps --settle
seconds (so that OpenBLAS's worker threads, which spin for a while after a call, have gone idle
before the next dcalign process starts) and prints "done BATCHED_SECONDS GEMM_SECONDS". Thread
counts and kernels are the library defaults: the peer sets no environment variable and records
the BLAS-related ones it finds (the driver removes them).
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from numpy_peer import haar_orthogonal  # the same O as the per-user NumPy peer

ENV_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OPENBLAS_DEFAULT_NUM_THREADS",
            "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_VERBOSE")


def product_einsum(anchors, concat, target):
    return np.einsum("kai,aj->kij", anchors, target, optimize=True)


def product_matmul(anchors, concat, target):
    return np.matmul(anchors.transpose(0, 2, 1), target)


def product_concat(anchors, concat, target):
    # W = [A_1 ... A_c] (a x cl, C order, formed once, untimed, as a user holding the anchors
    # side by side would have them): all M_i in one GEMM W^T T, (cl x l) read as (c, l, l).
    c, _, l = anchors.shape
    return (concat.T @ target).reshape(c, l, l)


PRODUCTS = {"einsum": product_einsum, "matmul": product_matmul, "concat": product_concat}
FORMS = {"einsum": "np.einsum('kai,aj->kij', A, T, optimize=True)",
         "matmul": "np.matmul(A.transpose(0, 2, 1), T)",
         "concat": "(W.T @ T).reshape(c, l, l) with W = [A_1 ... A_c] formed untimed"}


def batched_odc(anchors, concat, rng, product):
    """G (c x l x l), the polar factors of A_i^T A_0 O, with O drawn from rng."""
    o = haar_orthogonal(anchors.shape[2], rng, np.float64)
    target = anchors[0] @ o
    m = product(anchors, concat, target)
    u, _, vt = np.linalg.svd(m)
    return u @ vt


def choose_product(anchors, concat, target):
    """Run each product form once untimed and once timed; return (name, probe record)."""
    seconds, results = {}, {}
    for name, fn in PRODUCTS.items():
        fn(anchors, concat, target)
        t0 = time.perf_counter()
        results[name] = fn(anchors, concat, target)
        seconds[name] = time.perf_counter() - t0
    chosen = min(seconds, key=seconds.get)
    diff = max(float(np.max(np.abs(results[n] - results["einsum"]))) for n in results)
    return chosen, {"chosen": chosen, "probe_seconds": seconds, "max_abs_difference": diff,
                    "forms": FORMS}


def blas_info():
    """NumPy's build configuration and the BLAS threadpoolctl sees (version, kernels, threads)."""
    info = {}
    try:
        info["show_config"] = np.show_config(mode="dicts")
    except TypeError:  # NumPy < 1.26: no mode argument
        info["show_config"] = None
        info["show_config_note"] = "numpy.show_config(mode='dicts') not available"
    try:
        import threadpoolctl
        info["threadpoolctl"] = threadpoolctl.__version__
        info["threadpool_info"] = threadpoolctl.threadpool_info()
    except ImportError:
        info["threadpoolctl"] = None
        info["threadpool_info"] = None
    openblas = [p for p in (info["threadpool_info"] or []) if p.get("internal_api") == "openblas"]
    if openblas:
        p = openblas[0]
        info["openblas"] = {k: p.get(k) for k in
                            ("version", "architecture", "num_threads", "threading_layer",
                             "filepath")}
    return info


def describe():
    return {"peer": "numpy-batched", "python": platform.python_version(),
            "numpy": np.__version__, "blas": blas_info(),
            "env": {k: os.environ.get(k) for k in ENV_VARS}}


def stats(seconds):
    return {"median": statistics.median(seconds) if seconds else None,
            "min": min(seconds) if seconds else None, "seconds": seconds}


def orthogonality_error(g):
    eye = np.eye(g.shape[1])
    return float(max(np.linalg.norm(gi.T @ gi - eye) for gi in g))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--describe", action="store_true")
    ap.add_argument("--anchors")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--json")
    ap.add_argument("--step-stdin", action="store_true")
    ap.add_argument("--settle", type=float, default=0.25)
    args = ap.parse_args(argv)
    if args.describe:
        print(json.dumps(describe(), default=str))
        return 0
    if not args.anchors:
        ap.error("--anchors is required")
    if args.warmup < 0 or args.repetitions < 1:
        ap.error("--warmup must be >= 0 and --repetitions >= 1")

    t0 = time.perf_counter()
    anchors = np.ascontiguousarray(np.load(args.anchors), dtype=np.float64)
    load_seconds = time.perf_counter() - t0
    if anchors.ndim != 3:
        ap.error(f"--anchors: expected a (c, a, l) array, got shape {anchors.shape}")
    c, a, l = anchors.shape

    def fresh_rng():
        return np.random.default_rng(args.seed)

    concat = np.ascontiguousarray(anchors.transpose(1, 0, 2).reshape(a, c * l))
    probe_target = anchors[0] @ haar_orthogonal(l, fresh_rng(), np.float64)
    chosen, probe = choose_product(anchors, concat, probe_target)
    product = PRODUCTS[chosen]

    def run_batched():
        rng = fresh_rng()
        t = time.perf_counter()
        g = batched_odc(anchors, concat, rng, product)
        return time.perf_counter() - t, g

    def run_floor():
        t = time.perf_counter()
        product(anchors, concat, probe_target)
        return time.perf_counter() - t

    warm_batched, warm_floor = [], []
    g = None
    for _ in range(args.warmup):
        s, g = run_batched()
        warm_batched.append(s)
        warm_floor.append(run_floor())
    if g is None:
        _, g = run_batched()
    check = {"orthogonality_error": orthogonality_error(g)}
    del g

    if args.step_stdin:
        time.sleep(args.settle)
        print("ready", flush=True)
    batched, floor = [], []
    for _ in range(args.repetitions):
        if args.step_stdin:
            line = sys.stdin.readline()
            if not line or line.strip() == "quit":
                break
        s, _ = run_batched()
        batched.append(s)
        floor.append(run_floor())
        if args.step_stdin:
            time.sleep(args.settle)
            print(f"done {batched[-1]:.9f} {floor[-1]:.9f}", flush=True)

    doc = {
        "schema": "dcalign-numpy-batched-peer/1",
        "anchors": os.path.abspath(args.anchors),
        "shape": {"c": c, "a": a, "l": l}, "dtype": "float64",
        "seed": args.seed, "warmup": args.warmup, "repetitions": args.repetitions,
        "completed_repetitions": len(batched),
        "load_seconds_untimed": load_seconds,
        "product": probe,
        "check": check,
        "batched_odc": dict(stats(batched), warmup_seconds=warm_batched),
        "gemm_floor": dict(stats(floor), warmup_seconds=warm_floor),
        "timed": {"batched_odc": "Haar O draw, T = A[0] @ O, all M_i in one "
                                 f"{chosen}, batched np.linalg.svd(M), G = U @ Vt",
                  "gemm_floor": f"the {chosen} product alone, T already formed"},
    }
    doc.update(describe())
    text = json.dumps(doc, indent=1, default=str)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0 if len(batched) == args.repetitions else 1


if __name__ == "__main__":
    sys.exit(main())
