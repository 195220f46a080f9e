#!/usr/bin/env python3
"""Plain NumPy versions of the basis alignments of paper 001, timed like dcalign.

This is the peer that bench/dcalign_sweep times in the same run as dcalign. It implements the
papers' procedures as a NumPy user would write them, one user at a time:

  ODC (Alg. 4)         T = A_1 O (O Haar-orthogonal); for each user M = A_i^T T,
                       U, S, V^T = numpy.linalg.svd(M), G_i = U V^T.
  Imakura-DC (Alg. 2)  W = [A_1 ... A_c] (numpy.hstack); Z = U, the top-l left singular vectors
                       of W from a randomized SVD; G_i = numpy.linalg.pinv(A_i) @ Z.
  Kawakami-DC (Alg. 3) A_i = Q_i R_i (numpy.linalg.qr, reduced); W_Q = [Q_1 ... Q_c]; V, the top-l
                       right singular vectors of W_Q from a randomized SVD; G_i =
                       numpy.linalg.solve(R_i, V_i) with V_i the i-th l x l block of rows of V.

The randomized SVD is a plain Halko-Martinsson-Tropp range finder with the same oversampling
(10) and number of power iterations (2) as dcalign, re-orthonormalising with numpy.linalg.qr
after every product; like dcalign it falls back to the exact SVD when the sketch would be as
wide as the matrix.

What is timed: everything from the anchors (a list of c arrays a x l, as the users release
them) to the list of G_i, including the random draws of O and of the sketch and the
concatenations. Not timed: generating the anchors and seeding the generator.

Protocol with the driver (one process per point):
  numpy_peer.py --describe                      prints the versions as JSON
  numpy_peer.py --a A --l L --c C --series odc:float64,imakura:float64 --warmup W
                --repetitions R --seed S [--svd randomized|exact] [--oversampling 10]
                [--power-iterations 2]
prints {"results": [{"method", "precision", "status": "ok", "warmup_seconds", "seconds"}]} on
stdout. Thread counts come from the environment (OPENBLAS_NUM_THREADS, set by the driver).
"""

import argparse
import ctypes
import json
import os
import platform
import sys
import time

import numpy as np

DTYPES = {"float64": np.float64, "float32": np.float32}


def make_anchors(a, l, c, seed, dtype):
    """c uniform [0, 1) matrices a x l, C-contiguous, from a generator seeded by the point."""
    rng = np.random.default_rng([seed, a, l, c])
    return [rng.random((a, l), dtype=dtype) for _ in range(c)]


def haar_orthogonal(l, rng, dtype):
    """Haar-distributed orthogonal l x l matrix: QR of a Gaussian, signs of diag(R) into Q."""
    q, r = np.linalg.qr(rng.standard_normal((l, l)))
    q *= np.sign(np.diag(r))
    return q.astype(dtype, copy=False)


def randomized_svd(w, k, rng, oversampling=10, power_iterations=2):
    """Top-k singular triplets (U, s, V) of w by a randomized range finder (Halko et al. 2011)."""
    m, n = w.shape
    p = min(m, n)
    width = min(p, k + oversampling)
    if width >= p:
        return exact_svd(w, k)
    omega = rng.standard_normal((n, width)).astype(w.dtype, copy=False)
    q, _ = np.linalg.qr(w @ omega)
    for _ in range(power_iterations):
        z, _ = np.linalg.qr(w.T @ q)
        q, _ = np.linalg.qr(w @ z)
    u_b, s, vt = np.linalg.svd(q.T @ w, full_matrices=False)
    return q @ u_b[:, :k], s[:k], vt[:k].T


def exact_svd(w, k):
    u, s, vt = np.linalg.svd(w, full_matrices=False)
    return u[:, :k], s[:k], vt[:k].T


def top_singular(w, k, rng, svd):
    if svd["algorithm"] == "exact":
        return exact_svd(w, k)
    return randomized_svd(w, k, rng, svd["oversampling"], svd["power_iterations"])


def odc(anchors, rng, svd=None):
    l = anchors[0].shape[1]
    o = haar_orthogonal(l, rng, anchors[0].dtype)
    target = anchors[0] @ o
    g = []
    for a_i in anchors:
        m = a_i.T @ target
        u, _, vt = np.linalg.svd(m)
        g.append(u @ vt)
    return g


def imakura(anchors, rng, svd):
    l = anchors[0].shape[1]
    w = np.hstack(anchors)
    u, _, _ = top_singular(w, l, rng, svd)
    z = u  # R = I
    return [np.linalg.pinv(a_i) @ z for a_i in anchors]


def kawakami(anchors, rng, svd):
    l = anchors[0].shape[1]
    qs, rs = [], []
    for a_i in anchors:
        q, r = np.linalg.qr(a_i)
        qs.append(q)
        rs.append(r)
    w_q = np.hstack(qs)
    _, _, v = top_singular(w_q, l, rng, svd)
    return [np.linalg.solve(r, v[i * l:(i + 1) * l]) for i, r in enumerate(rs)]


METHODS = {"odc": odc, "imakura": imakura, "kawakami": kawakami}


def time_method(method, anchors, seed, svd, warmup, repetitions):
    """Warm-up runs, then timed runs; each run gets a fresh generator (outside the clock)."""
    fn = METHODS[method]
    warm, times = [], []
    for r in range(warmup + repetitions):
        rng = np.random.default_rng([seed, 1])
        t0 = time.perf_counter()
        fn(anchors, rng, svd)
        t = time.perf_counter() - t0
        (warm if r < warmup else times).append(t)
    return warm, times


def loaded_blas():
    """Path, config string and thread count of the OpenBLAS NumPy loaded, when it is OpenBLAS."""
    info = {"libraries": []}
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if ".so" in line}
    except OSError:
        return info
    for path in sorted(paths):
        name = os.path.basename(path)
        if "blas" in name or "lapack" in name:
            info["libraries"].append(os.path.realpath(path))
    for path in info["libraries"]:
        if "openblas" in os.path.basename(path):
            try:
                lib = ctypes.CDLL(path)
                lib.openblas_get_config.restype = ctypes.c_char_p
                info["openblas_config"] = lib.openblas_get_config().decode()
                info["openblas_threads"] = lib.openblas_get_num_threads()
            except (OSError, AttributeError):
                pass
            break
    return info


def describe():
    return {
        "peer": "numpy",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": loaded_blas(),
        "pinv": "numpy.linalg.pinv (SVD based)",
        "kawakami_solve": "numpy.linalg.solve on R_i (LU; R_i is triangular)",
        "threads_env": {k: os.environ.get(k) for k in
                        ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")},
    }


def parse_series(spec):
    out = []
    for item in spec.split(","):
        method, _, precision = item.partition(":")
        precision = precision or "float64"
        if method not in METHODS:
            raise SystemExit(f"numpy_peer: unknown method {method!r}; expected {sorted(METHODS)}")
        if precision not in DTYPES:
            raise SystemExit(f"numpy_peer: unknown precision {precision!r}")
        out.append((method, precision))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--describe", action="store_true")
    ap.add_argument("--a", type=int)
    ap.add_argument("--l", type=int)
    ap.add_argument("--c", type=int)
    ap.add_argument("--series", default="odc:float64")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--svd", choices=("randomized", "exact"), default="randomized")
    ap.add_argument("--oversampling", type=int, default=10)
    ap.add_argument("--power-iterations", type=int, default=2)
    args = ap.parse_args(argv)
    if args.describe:
        print(json.dumps(describe()))
        return 0
    if not (args.a and args.l and args.c):
        ap.error("--a, --l and --c are required")
    svd = {"algorithm": args.svd, "oversampling": args.oversampling,
           "power_iterations": args.power_iterations}
    series = parse_series(args.series)
    results = []
    for precision in dict.fromkeys(p for _, p in series):
        anchors = make_anchors(args.a, args.l, args.c, args.seed, DTYPES[precision])
        for method, p in series:
            if p != precision:
                continue
            try:
                warm, times = time_method(method, anchors, args.seed, svd, args.warmup,
                                          args.repetitions)
                results.append({"method": method, "precision": precision, "status": "ok",
                                "warmup_seconds": warm, "seconds": times})
            except Exception as e:  # reported per series; the driver records it
                results.append({"method": method, "precision": precision, "status": "error",
                                "reason": f"{type(e).__name__}: {e}"})
        del anchors
    print(json.dumps({"results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
