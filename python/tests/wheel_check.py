"""The checks of scripts/test-wheel.sh on an installed wheel (not a pytest module).

  wheel_check.py --refs DIR --make-refs CLI
                                         the references: DIR/A.npy and, for every method,
                                         DIR/G_<method>.npy from the source build's `CLI align`
  wheel_check.py --refs DIR --hidden     every method on NumPy arrays equals the references of the
                                         source build (DIR/G_<method>.npy for DIR/A.npy); the
                                         OpenBLAS mapped into this process is the wheel's own;
                                         blas_info() names a kernel set
  wheel_check.py --refs DIR --torch      the same on torch tensors (tensors come back)
  wheel_check.py --import-time WHEEL_PY SOURCE_PY
                                         `import dcalign` as whole processes, interleaved: the
                                         wheel's median at most 1.5 x the source build's
"""
import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

METHODS = ["odc", "imakura", "kawakami", "gopp", "opp", "rdp-ls", "rdp-opp"]
SEED = 3  # of the references and of every alignment compared with them
# The same algorithm on the same OpenBLAS version and kernel set: the results agree to rounding
# (bit for bit where the thread split is the same). RDP's L-BFGS stops on a nearly flat valley,
# where rounding moves the stopping point (the distributed tests allow it 1e-2 for the same
# reason).
TOLERANCE = {m: 1e-10 for m in METHODS} | {"rdp-ls": 1e-2, "rdp-opp": 1e-2}


def make_refs(refs, cli):
    import numpy as np

    refs.mkdir(parents=True, exist_ok=True)
    np.save(refs / "A.npy", np.random.default_rng(7).uniform(size=(4, 300, 6)))
    for m in METHODS:
        subprocess.run([cli, "align", "--method", m, "--seed", str(SEED), "--anchors",
                        str(refs / "A.npy"), "--out", str(refs / f"G_{m}.npy")],
                       check=True, stderr=subprocess.DEVNULL)
    return []


def compare(refs, align, to_numpy, what):
    import numpy as np

    A = np.load(refs / "A.npy")
    failures = []
    for m in METHODS:
        G, _ = align(A, m)
        got = to_numpy(G)
        want = np.load(refs / f"G_{m}.npy")
        diff = float(np.abs(got - want).max() / max(1.0, float(np.abs(want).max())))
        ok = got.shape == want.shape and diff <= TOLERANCE[m]
        print(f"wheel_check: {what}: {m:8s} max relative difference {diff:.1e} "
              f"(bound {TOLERANCE[m]:.0e}) {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append(m)
    return failures


def hidden(refs):
    import numpy as np

    import dcalign

    failures = compare(refs, lambda A, m: dcalign.align(A, method=m, seed=SEED), np.asarray,
                       "NumPy")
    if dcalign.methods() != METHODS:
        failures.append(f"the wheel's methods {dcalign.methods()} are not the checked {METHODS}")
    maps = Path("/proc/self/maps").read_text().splitlines()
    blas = sorted({line.split()[-1] for line in maps if "openblas" in line.lower()})
    print("wheel_check: OpenBLAS mapped from " + ", ".join(blas))
    if not blas or not all("dcalign.libs" in p or "numpy" in p for p in blas):
        failures.append("the OpenBLAS in use is not the wheel's")
    if not any("dcalign.libs" in p for p in blas):
        failures.append("no OpenBLAS from dcalign.libs is mapped")
    info = dcalign.blas_info()
    print(f"wheel_check: blas_info(): {info}")
    if not info["library"].startswith("OpenBLAS") or not info["kernels"]:
        failures.append(f"blas_info() names {info}")
    for p in ("/usr/lib/x86_64-linux-gnu/libopenblas.so.0", "/usr/lib/x86_64-linux-gnu/liblbfgs.so.0"):
        if Path(p).exists():
            failures.append(f"{p} is not hidden")
    return failures


def torch_tensors(refs):
    import torch

    import dcalign

    def align(A, m):
        G, _ = dcalign.align(torch.from_numpy(A), method=m, seed=SEED)
        if not isinstance(G, torch.Tensor):
            raise TypeError(f"{m}: a tensor in gave {type(G).__name__} back")
        return G, None

    return compare(refs, align, lambda G: G.numpy(), "torch")


def import_time(wheel_py, source_py, runs=15):
    times = {"wheel": [], "source": []}
    for _ in range(runs):
        for name, py in (("wheel", wheel_py), ("source", source_py)):
            t = time.perf_counter()
            subprocess.run([py, "-c", "import dcalign"], check=True)
            times[name].append(time.perf_counter() - t)
    w, s = statistics.median(times["wheel"]), statistics.median(times["source"])
    ratio = w / s
    print(f"wheel_check: python -c 'import dcalign', median of {runs}: wheel {w * 1e3:.1f} ms, "
          f"source build {s * 1e3:.1f} ms, ratio {ratio:.2f} (bound 1.5)")
    return [] if ratio <= 1.5 else [f"import takes {ratio:.2f} x the source build's"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--refs", type=Path)
    ap.add_argument("--make-refs", metavar="CLI")
    ap.add_argument("--hidden", action="store_true")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--import-time", nargs=2, metavar=("WHEEL_PY", "SOURCE_PY"))
    args = ap.parse_args()
    if args.make_refs:
        failures = make_refs(args.refs, args.make_refs)
    elif args.import_time:
        failures = import_time(*args.import_time)
    elif args.hidden:
        failures = hidden(args.refs)
    else:
        failures = torch_tensors(args.refs)
    for f in failures:
        print(f"wheel_check: FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
