"""The wheel step's first check (scripts/gpu-check/wheel.sh), run by the fresh environment's
interpreter; it imports no PyTorch (scripts/gpu-rehearse.sh --wheel-only runs it where the
system's BLAS/LAPACK, libgfortran, libgomp and libLBFGS are hidden, which Debian's PyTorch needs).

  wheel_smoke.py --site DIR [--cuda]

`import dcalign` must come from DIR (the environment's site-packages, where the wheel was
installed); every method aligns a set of anchors (finite, of the right shape); the wheel's own
OpenBLAS (dcalign.libs/) is mapped into the process. With --cuda (a GPU is there):
dcalign.cuda_available(), ODC on the GPU equal to the CPU's to 1e-10 (float64), and the cuBLAS
and cuSOLVER the CUDA backend opened (the process's maps) are printed. Exit 1 on a failure.
"""
import argparse
import sys
from pathlib import Path


def mapped(word):
    maps = Path("/proc/self/maps").read_text().splitlines()
    return sorted({line.split()[-1] for line in maps if word in line.lower() and "/" in line})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--site", type=Path, required=True)
    ap.add_argument("--cuda", action="store_true")
    args = ap.parse_args()
    failures = []
    import numpy as np

    import dcalign

    where = Path(dcalign.__file__).resolve()
    print(f"wheel_smoke: dcalign {getattr(dcalign, '__version__', '?')} from {where.parent}; "
          f"Python {sys.version.split()[0]}, NumPy {np.__version__}")
    if args.site.resolve() not in where.parents:
        failures.append(f"dcalign was imported from {where.parent}, not from {args.site}")
    print(f"wheel_smoke: methods: {dcalign.methods()}")
    A = np.random.default_rng(7).uniform(size=(4, 300, 6))
    for m in dcalign.methods():
        G, _ = dcalign.align(A, method=m, seed=3)
        ok = G.shape == (4, 6, 6) and bool(np.isfinite(G).all())
        print(f"wheel_smoke: {m:8s} on the CPU: {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append(f"{m}: shape {G.shape} or not finite")
    blas = mapped("openblas")
    print("wheel_smoke: OpenBLAS mapped from " + ", ".join(blas))
    # Others may be mapped too (NumPy's, or the system's that Debian's NumPy links).
    if not any("dcalign.libs" in p for p in blas):
        failures.append("the wheel's own OpenBLAS (dcalign.libs/) is not mapped")
    print(f"wheel_smoke: blas_info(): {dcalign.blas_info()}")
    available = dcalign.cuda_available()
    print(f"wheel_smoke: cuda_available(): {available}")
    if args.cuda:
        if not available:
            failures.append("a GPU is there, but dcalign.cuda_available() is False")
        else:
            G_cpu, _ = dcalign.align(A, target_rotation="identity")
            G_gpu, report = dcalign.align(A, target_rotation="identity", device="cuda")
            diff = float(np.abs(G_gpu - G_cpu).max())
            ok = report.get("device") == "cuda" and diff <= 1e-10
            print(f"wheel_smoke: odc on the GPU: max difference to the CPU {diff:.1e} "
                  f"(bound 1e-10), report device {report.get('device')}: "
                  f"{'ok' if ok else 'FAILED'}")
            if not ok:
                failures.append(f"odc on the GPU differs from the CPU by {diff:.1e}")
            for lib in ("cublas", "cusolver"):
                print(f"wheel_smoke: {lib} opened from: " + (", ".join(
                    p for p in mapped(lib) if ".so" in p) or "nothing mapped"))
    for f in failures:
        print(f"wheel_smoke: FAILED: {f}", file=sys.stderr)
    if not failures:
        print("wheel_smoke: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
