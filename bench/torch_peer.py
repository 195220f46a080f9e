#!/usr/bin/env python3
"""The PyTorch peer: the alignments written the straightforward PyTorch way, timed on the GPU.

What a PyTorch user would write, with the anchors as one tensor A of shape (c, a, l) (A[i] is
A_i) on the device:

  ODC          Z = A[0] @ O (O a fixed random orthogonal matrix: torch.linalg.qr of a Gaussian,
               signs of diag(R) moved into Q); M = A.transpose(1, 2) @ Z (batched);
               U, S, Vh = torch.linalg.svd(M) (batched); G = U @ Vh.
  Imakura-DC   W = A.permute(1, 0, 2).reshape(a, c*l) = [A_1 ... A_c];
               U, S, Vh = torch.linalg.svd(W, full_matrices=False); Z = U[:, :l];
               G = torch.linalg.lstsq(A, Z.expand(c, a, l)).solution.
  Kawakami-DC  Q, R = torch.linalg.qr(A) (batched, reduced); W_Q = [Q_1 ... Q_c];
               V = top-l right singular vectors of W_Q (torch.linalg.svd); G_i =
               torch.linalg.solve_triangular(R_i, V_i, upper=True), V_i the i-th l x l block.

Standalone benchmark (what scripts/gpu-check.sh runs; the counterpart of gpu_bench):

  torch_peer.py [--points "20000,50,50;1000,50,1000;..."] [--methods odc,imakura]
                [--precision float32,float64] [--repetitions 20] [--warmup 3] [--seed S]
                [--device cuda|cpu] [--host-memory pageable|pinned] [--json FILE]
                [--max-seconds-per-series 60] [--max-seconds-total 0]

Anchors: i.i.d. N(0, 1), drawn on the device by torch.randn with a torch.Generator seeded from
--seed and the point (the same distribution as gpu_bench's anchors, not the same numbers).
Per point, precision and method: one untimed checked run (orthogonality error, objective),
which is the first of the --warmup untimed runs, then up to --repetitions pairs of timed runs
(at least one), alternating "resident"
(anchors already on the device: the method alone) and "with upload" (torch.from_numpy(host)
.to(device) of a host copy of the anchors, then the method; the host copy is a NumPy array in
pageable memory, or pinned with --host-memory pinned). Timing: torch.cuda.Event pairs on the
current stream (perf_counter on the CPU). A series starts no new run once
--max-seconds-per-series have passed since it began, and is then recorded as "capped"; no series
starts once --max-seconds-total have passed since the start ("skipped"). TF32 is
disabled for matrix products (dcalign's CUDA backend does not use it either). The JSON is
rewritten after every series.

Protocol with the sweep driver (bench/dcalign_sweep --peers torch), like numpy_peer.py:

  torch_peer.py --describe
  torch_peer.py --a A --l L --c C --series odc:float64,... --warmup W --repetitions R --seed S
                [--svd ...] [--oversampling ...] [--power-iterations ...]

prints {"results": [{"method", "precision", "status", "warmup_seconds", "seconds"}]}. There the
anchors are the driver's Unif[0, 1) anchors (a list of c NumPy arrays, as numpy_peer.py makes
them) and the timed span is the list of host anchors to the list of G_i on the host (stacking,
upload, method, download), as dcalign's align() is timed by the driver. The SVDs are always
exact (torch.linalg.svd); --svd is recorded but not used. GOPP has no peer version.

Without PyTorch (or without a GPU for --device cuda) every series is reported with status
"error" and the reason, and the exit status is 3.
"""

import argparse
import json
import math
import os
import platform
import sys
import time

DEFAULT_POINTS = "20000,50,50;1000,50,1000;1000,950,50;1000,50,10000"
METHODS = ("odc", "imakura", "kawakami")
PRECISIONS = ("float32", "float64")


def import_torch():
    """(torch, None) or (None, reason)."""
    try:
        import torch  # noqa: F401
        return torch, None
    except Exception as e:  # ImportError, or a broken installation
        return None, f"PyTorch is not importable: {type(e).__name__}: {e}"


# ---------------------------------------------------------------------------------------------
# The methods


def haar_orthogonal(torch, l, generator, dtype, device):
    """Haar-distributed orthogonal l x l matrix (QR of a Gaussian, signs of diag(R) into Q)."""
    g = torch.randn((l, l), generator=generator, dtype=torch.float64, device=device)
    q, r = torch.linalg.qr(g)
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    return q.to(dtype)


def odc(torch, A, O):
    Z = A[0] @ O
    M = A.transpose(1, 2) @ Z
    U, S, Vh = torch.linalg.svd(M)
    return U @ Vh, Z


def imakura(torch, A):
    c, a, l = A.shape
    W = A.permute(1, 0, 2).reshape(a, c * l)
    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    Z = U[:, :l]
    return torch.linalg.lstsq(A, Z.expand(c, a, l)).solution, Z


def kawakami(torch, A):
    c, a, l = A.shape
    Q, R = torch.linalg.qr(A)
    WQ = Q.permute(1, 0, 2).reshape(a, c * l)
    U, S, Vh = torch.linalg.svd(WQ, full_matrices=False)
    V = Vh[:l].transpose(0, 1).reshape(c, l, l)
    return torch.linalg.solve_triangular(R, V, upper=True), None


def run_method(torch, method, A, O):
    if method == "odc":
        return odc(torch, A, O)
    if method == "imakura":
        return imakura(torch, A)
    if method == "kawakami":
        return kawakami(torch, A)
    raise ValueError(f"unknown method {method!r}")


def check(torch, A, G, Z):
    """Orthogonality error max_i ||G_i^T G_i - I||_F and, with a target, sum_i ||A_i G_i - Z||^2."""
    c, a, l = A.shape
    eye = torch.eye(l, dtype=G.dtype, device=G.device)
    orth = torch.linalg.matrix_norm(G.transpose(1, 2) @ G - eye).max().item()
    out = {"orthogonality_error": orth}
    AG = A @ G
    if Z is not None:
        out["objective"] = float(((AG - Z) ** 2).sum().item())
    zbar = AG.mean(dim=0)
    out["consensus_objective"] = float(((AG - zbar) ** 2).sum().item())
    return out


# ---------------------------------------------------------------------------------------------
# Statistics and output


def stats(times):
    """Median, min, max, mean, 10th/90th percentiles (linear interpolation, NumPy's default)."""
    out = {"repetitions": len(times)}
    if not times:
        return out
    t = sorted(times)

    def q(p):
        x = p * (len(t) - 1)
        i = int(math.floor(x))
        k = min(i + 1, len(t) - 1)
        return t[i] + (x - i) * (t[k] - t[i])

    out.update(median=q(0.5), min=t[0], p10=q(0.1), p90=q(0.9), max=t[-1],
               mean=sum(t) / len(t))
    return out


def write_json(path, doc):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def parse_points(spec):
    points = []
    for item in spec.split(";"):
        item = item.strip()
        if not item:
            continue
        parts = [p.strip() for p in item.split(",")]
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"--points: {item!r} is not 'a,l,c'")
        a, l, c = (int(p) for p in parts)
        if not (a >= l >= 1 and c >= 1):
            raise ValueError(f"--points: {item!r} needs a >= l >= 1 and c >= 1")
        points.append((a, l, c))
    if not points:
        raise ValueError("--points: no point given")
    return points


def parse_list(spec, allowed, what):
    items = [s.strip() for s in spec.split(",") if s.strip()]
    for s in items:
        if s not in allowed:
            raise ValueError(f"{what}: unknown {s!r}; expected one of {', '.join(allowed)}")
    return items


def describe(torch, device):
    d = {"peer": "torch", "implemented": True, "python": platform.python_version(),
         "methods": list(METHODS)}
    if torch is None:
        d["available"] = False
        return d
    d["available"] = True
    d["torch"] = torch.__version__
    d["cuda"] = torch.version.cuda
    d["device"] = device
    d["cuda_available"] = bool(torch.cuda.is_available())
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        d["gpu"] = {"name": props.name, "multiprocessors": props.multi_processor_count,
                    "memory_bytes": props.total_memory}
        try:
            d["preferred_linalg_library"] = str(torch.backends.cuda.preferred_linalg_library())
        except Exception:  # older PyTorch
            pass
    d["allow_tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
    d["threads"] = torch.get_num_threads()
    return d


# ---------------------------------------------------------------------------------------------
# The timer


class Timer:
    def __init__(self, torch, device):
        self.torch = torch
        self.cuda = device == "cuda"

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def __call__(self, fn):
        """(device seconds, wall seconds) of fn()."""
        torch = self.torch
        w0 = time.perf_counter()
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3, time.perf_counter() - w0
        fn()
        t = time.perf_counter() - w0
        return t, t


def point_seed(seed, a, l, c):
    return (seed ^ (a << 40) ^ (l << 20) ^ c) & 0x7FFFFFFFFFFFFFFF


def run_standalone(args, torch, reason):
    try:
        points = parse_points(args.points)
        methods = parse_list(args.methods, METHODS, "--methods")
        precisions = parse_list(args.precision, PRECISIONS, "--precision")
    except ValueError as e:
        print(f"torch_peer: {e}", file=sys.stderr)
        return 2
    device = args.device
    doc = {
        "schema": "dcalign-torch-peer/1",
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "parameters": {
            "points": [{"a": a, "l": l, "c": c} for a, l, c in points], "methods": methods,
            "precisions": precisions, "repetitions": args.repetitions, "warmup": args.warmup,
            "seed": args.seed, "device": device, "host_memory": args.host_memory,
            "max_seconds_per_series": args.max_seconds_per_series,
            "max_seconds_total": args.max_seconds_total,
            "anchors": "i.i.d. N(0,1) from torch.randn on the device, torch.Generator seeded "
                       "with seed ^ a<<40 ^ l<<20 ^ c",
            "timed": "resident: the method on device anchors; with_upload: "
                     "torch.from_numpy(host).to(device) then the method; CUDA events",
        },
        "results": [],
    }
    if torch is not None and device == "cuda" and not torch.cuda.is_available():
        reason = "PyTorch sees no CUDA device (torch.cuda.is_available() is False)"
    doc["machine"] = describe(torch if reason is None else None, device)
    if reason is not None:
        doc["status"] = "no_gpu" if torch is not None else "no_torch"
        doc["reason"] = reason
        for a, l, c in points:
            for prec in precisions:
                for m in methods:
                    doc["results"].append({"a": a, "l": l, "c": c, "precision": prec,
                                           "method": m, "status": "error", "reason": reason})
        write_json(args.json, doc)
        print(f"torch_peer: {reason}", file=sys.stderr)
        return 3

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    timer = Timer(torch, device)
    t_start = time.perf_counter()
    any_error = False

    def past_total():
        return args.max_seconds_total > 0 and time.perf_counter() - t_start > args.max_seconds_total

    print(f"{'point (a,l,c)':18} {'prec':8} {'method':9} {'resident ms':>11} {'w/upload ms':>12} "
          f"{'reps':>5}  status", flush=True)
    for a, l, c in points:
        for prec in precisions:
            dtype = getattr(torch, prec)
            base = {"a": a, "l": l, "c": c, "precision": prec}
            A = host = O = None
            try:
                if past_total():
                    raise TimeoutError("--max-seconds-total reached")
                t0 = time.perf_counter()
                gen = torch.Generator(device=device)
                gen.manual_seed(point_seed(args.seed, a, l, c))
                A = torch.randn((c, a, l), generator=gen, dtype=dtype, device=device)
                O = haar_orthogonal(torch, l, gen, dtype, device)
                host_np = A.cpu().numpy()
                host = torch.from_numpy(host_np)
                if args.host_memory == "pinned":
                    host = host.pin_memory()
                timer.sync()
                setup = time.perf_counter() - t0
            except Exception as e:
                status = "skipped" if isinstance(e, TimeoutError) else "error"
                any_error = any_error or status == "error"
                for m in methods:
                    r = dict(base, method=m, status=status, reason=f"{type(e).__name__}: {e}")
                    doc["results"].append(r)
                    print_row(r)
                A = host = O = None
                empty_cache(torch, device)
                write_json(args.json, doc)
                continue
            for method in methods:
                r = dict(base, method=method, setup_seconds=setup)
                if past_total():
                    r.update(status="skipped", reason="--max-seconds-total reached")
                    doc["results"].append(r)
                    print_row(r)
                    write_json(args.json, doc)
                    continue
                series_start = time.perf_counter()

                def over_cap():
                    return ((args.max_seconds_per_series > 0 and
                             time.perf_counter() - series_start > args.max_seconds_per_series)
                            or past_total())

                warm, resident, resident_wall, upload, upload_wall = [], [], [], [], []
                cap = None
                try:
                    G, Z = run_method(torch, method, A, O)
                    r["check"] = check(torch, A, G, Z)
                    del G, Z
                    # The checked run above was the first warm-up run.
                    for _ in range(1, args.warmup):
                        if over_cap():
                            cap = "time cap reached during the warm-up runs"
                            break
                        warm.append(timer(lambda: run_method(torch, method, A, O))[0])
                    # At least one timed pair, unless the total cap is reached.
                    for k in range(args.repetitions):
                        if (over_cap() if k > 0 else past_total()):
                            cap = (f"time cap reached after {k} of {args.repetitions} "
                                   "repetitions")
                            break
                        t, w = timer(lambda: run_method(torch, method, A, O))
                        resident.append(t)
                        resident_wall.append(w)
                        t, w = timer(lambda: run_method(torch, method, host.to(device), O))
                        upload.append(t)
                        upload_wall.append(w)
                    r["status"] = "capped" if cap else "ok"
                    if cap:
                        r["reason"] = cap
                except Exception as e:
                    any_error = True
                    r["status"] = "error"
                    r["reason"] = f"{type(e).__name__}: {e}"
                    empty_cache(torch, device)
                r["warmup_seconds"] = warm
                r["resident"] = dict(stats(resident), seconds=resident)
                r["resident"]["wall_median"] = stats(resident_wall).get("median")
                r["with_upload"] = dict(stats(upload), seconds=upload)
                r["with_upload"]["wall_median"] = stats(upload_wall).get("median")
                r["series_seconds"] = time.perf_counter() - series_start
                doc["results"].append(r)
                print_row(r)
                write_json(args.json, doc)
            del A, host, O
            empty_cache(torch, device)
    doc["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc["wall_seconds"] = time.perf_counter() - t_start
    doc["status"] = "errors" if any_error else "ok"
    write_json(args.json, doc)
    return 1 if any_error else 0


def empty_cache(torch, device):
    if device == "cuda":
        try:
            torch.cuda.empty_cache()
        except Exception:
            pass


def print_row(r):
    def ms(series):
        v = r.get(series, {}).get("median")
        return f"{v * 1e3:.3f}" if v is not None else "-"

    status = r.get("status", "")
    if "reason" in r:
        status += f" ({r['reason']})"
    point = f"{r['a']},{r['l']},{r['c']}"
    reps = r.get("resident", {}).get("repetitions", 0)
    print(f"{point:18} {r['precision']:8} {r['method']:9} {ms('resident'):>11} "
          f"{ms('with_upload'):>12} {reps:>5}  {status}", flush=True)


# ---------------------------------------------------------------------------------------------
# The sweep driver's protocol


def run_driver(args, torch, reason):
    series = []
    for item in args.series.split(","):
        method, _, precision = item.partition(":")
        series.append((method, precision or "float64"))
    device = args.device
    if reason is None and device == "cuda" and not torch.cuda.is_available():
        reason = "PyTorch sees no CUDA device (torch.cuda.is_available() is False)"
    results = []
    if reason is not None:
        for method, precision in series:
            results.append({"method": method, "precision": precision, "status": "error",
                            "reason": reason})
        print(json.dumps({"results": results}))
        return 0
    import numpy as np

    timer = Timer(torch, device)
    torch.backends.cuda.matmul.allow_tf32 = False
    for precision in dict.fromkeys(p for _, p in series):
        if precision not in PRECISIONS:
            for method, p in series:
                if p == precision:
                    results.append({"method": method, "precision": p, "status": "error",
                                    "reason": f"unknown precision {p!r}"})
            continue
        dtype = getattr(torch, precision)
        rng = np.random.default_rng([args.seed, args.a, args.l, args.c])
        anchors = [rng.random((args.a, args.l), dtype=getattr(np, precision))
                   for _ in range(args.c)]
        gen = torch.Generator(device=device)
        gen.manual_seed(args.seed)
        O = haar_orthogonal(torch, args.l, gen, dtype, device)
        for method, p in series:
            if p != precision:
                continue
            if method not in METHODS:
                results.append({"method": method, "precision": p, "status": "not_implemented",
                                "reason": f"the PyTorch peer has no {method} version"})
                continue

            def once():
                A = torch.from_numpy(np.stack(anchors)).to(device)
                G, _ = run_method(torch, method, A, O)
                return [g.numpy() for g in G.cpu()]

            try:
                warm = [timer(once)[1] for _ in range(args.warmup)]
                times = [timer(once)[1] for _ in range(args.repetitions)]
                results.append({"method": method, "precision": p, "status": "ok",
                                "warmup_seconds": warm, "seconds": times,
                                "notes": {"svd": "exact (torch.linalg.svd)", "device": device,
                                          "timed": "host anchors to host G (wall clock)"}})
            except Exception as e:
                results.append({"method": method, "precision": p, "status": "error",
                                "reason": f"{type(e).__name__}: {e}"})
                empty_cache(torch, device)
    print(json.dumps({"results": results}))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--describe", action="store_true", help="print the versions as JSON")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    # standalone benchmark
    ap.add_argument("--points", default=DEFAULT_POINTS, help="semicolon-separated a,l,c")
    ap.add_argument("--methods", default="odc,imakura", help="odc, imakura, kawakami")
    ap.add_argument("--precision", default="float32,float64")
    ap.add_argument("--repetitions", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--host-memory", choices=("pageable", "pinned"), default="pageable")
    ap.add_argument("--json", help="write the results here (rewritten after every series)")
    ap.add_argument("--max-seconds-per-series", type=float, default=60.0)
    ap.add_argument("--max-seconds-total", type=float, default=0.0)
    # the sweep driver's protocol
    ap.add_argument("--a", type=int)
    ap.add_argument("--l", type=int)
    ap.add_argument("--c", type=int)
    ap.add_argument("--series")
    ap.add_argument("--svd", default="exact")
    ap.add_argument("--oversampling", type=int, default=10)
    ap.add_argument("--power-iterations", type=int, default=2)
    args = ap.parse_args(argv)
    if args.repetitions < 1 or args.warmup < 0:
        ap.error("--repetitions must be at least 1 and --warmup at least 0")
    torch, reason = import_torch()
    if args.describe:
        print(json.dumps(describe(torch, args.device)))
        return 0
    if args.a is not None or args.series is not None:
        if not (args.a and args.l and args.c and args.series):
            ap.error("the driver protocol needs --a, --l, --c and --series")
        return run_driver(args, torch, reason)
    return run_standalone(args, torch, reason)


if __name__ == "__main__":
    sys.exit(main())
