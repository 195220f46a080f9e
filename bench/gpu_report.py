#!/usr/bin/env python3
"""Markdown tables from gpu_bench's JSON and torch_peer.py's JSON (used by scripts/gpu-check.sh).

  gpu_report.py --bench gpu_bench.json [--peer torch_peer.json]

Prints the reference rates (device-to-device copy bandwidth, cuBLAS GEMM rates, against the
nominal H100/H200 SXM peaks) and one row per point, precision and method: dcalign's resident
and with-upload medians, the PyTorch peer's, their ratio peer/dcalign, and the achieved
fractions of the measured copy bandwidth (the anchors read once) and of the measured GEMM rate
(the 2 a c l^2 flops of the product W^T Z). Standard library only; either file may be missing
or partial (a run stopped by a time cap), and the tables say what is missing.
"""

import argparse
import json
import sys

# Nominal SXM peaks (dense, TFLOP/s): H100 and H200 share the compute figures.
NOMINAL = {"float32": 67.0, "float64": 67.0}
NOMINAL_NOTE = ("nominal H100/H200 SXM: 67 TFLOP/s fp32 (FFMA), 67 TFLOP/s fp64 tensor core; "
                "HBM3 3.35 TB/s (H100), HBM3e 4.8 TB/s (H200)")


def load(path):
    if not path:
        return None, "not given"
    try:
        with open(path) as f:
            return json.load(f), None
    except FileNotFoundError:
        return None, f"{path} not found"
    except (OSError, ValueError) as e:
        return None, f"{path} unreadable: {e}"


def key(r):
    return (r.get("a"), r.get("l"), r.get("c"), r.get("precision"), r.get("method"))


def ms(v):
    """Seconds as milliseconds, with 3 decimals below 10 ms, 1 below 1 s, none above."""
    if v is None:
        return "-"
    x = v * 1e3
    return f"{x:.3f}" if x < 10 else (f"{x:.1f}" if x < 1000 else f"{x:.0f}")


def pct(v):
    return "-" if v is None else f"{v * 100:.1f}%"


def med(r, series):
    s = (r or {}).get(series) or {}
    return s.get("median")


def reference_lines(bench):
    ref = (bench or {}).get("reference") or {}
    out = []
    copy = ref.get("d2d_copy")
    if copy:
        out.append(f"- device-to-device copy: {copy['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s "
                   f"(read + write, {copy['bytes_per_copy'] / 2**30:.2f} GiB copies, median)")
    for prec in ("float32", "float64"):
        g = (ref.get("gemm") or {}).get(prec)
        if g:
            rate = g["flops_per_s"] / 1e12
            out.append(f"- cuBLAS GEMM {prec} (n = {g['n']}): {rate:.1f} TFLOP/s "
                       f"({rate / NOMINAL[prec] * 100:.0f}% of the nominal {NOMINAL[prec]:.0f})")
    if ref.get("error"):
        out.append(f"- reference measurement failed: {ref['error']}")
    if not out:
        out.append("- (no reference measurements)")
    out.append(f"- {NOMINAL_NOTE}")
    return out


def table(bench, peer):
    """The Markdown table (a list of lines)."""
    rows = (bench or {}).get("results") or []
    peer_rows = {key(r): r for r in ((peer or {}).get("results") or [])}
    lines = [
        "| (a, l, c) | precision | method | dcalign resident ms (p10-p90) | dcalign with upload "
        "ms | PyTorch resident ms | PyTorch with upload ms | peer/dcalign resident | "
        "peer/dcalign upload | anchor BW | product FLOP | iterations | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    seen = set()
    for r in rows:
        k = key(r)
        seen.add(k)
        p = peer_rows.get(k)
        d_res, d_up = med(r, "resident"), med(r, "with_upload")
        p_res, p_up = med(p, "resident"), med(p, "with_upload")
        res = r.get("resident") or {}
        spread = (f" ({ms(res.get('p10'))}-{ms(res.get('p90'))})"
                  if res.get("p10") is not None else "")
        derived = r.get("derived") or {}
        iters = (r.get("report") or {}).get("iterations")
        status = r.get("status", "?")
        if r.get("reason"):
            status += f": {r['reason']}"
        if p is not None and p.get("status") not in (None, "ok"):
            status += f"; peer {p.get('status')}" + (f": {p['reason']}" if p.get("reason") else "")
        lines.append(
            f"| ({r['a']}, {r['l']}, {r['c']}) | {r['precision']} | {r['method']} | "
            f"{ms(d_res)}{spread} | {ms(d_up)} | {ms(p_res)} | {ms(p_up)} | "
            f"{ratio(p_res, d_res)} | {ratio(p_up, d_up)} | "
            f"{pct(derived.get('anchor_bandwidth_fraction'))} | "
            f"{pct(derived.get('product_flop_fraction'))} | "
            f"{'-' if iters is None else iters} | {status.replace('|', '/')} |")
    for k, p in peer_rows.items():
        if k in seen:
            continue
        status = f"dcalign: no result; peer {p.get('status')}"
        lines.append(f"| ({k[0]}, {k[1]}, {k[2]}) | {k[3]} | {k[4]} | - | - | "
                     f"{ms(med(p, 'resident'))} | {ms(med(p, 'with_upload'))} | - | - | - | - | - "
                     f"| {status} |")
    return lines


def phase_table(bench):
    """ODC's phase split (gpu_bench's "phases"), a list of lines; empty without one."""
    rows = [r for r in ((bench or {}).get("results") or [])
            if r.get("method") == "odc" and "products" in (r.get("phases") or {})]
    if not rows:
        return []
    ref = (bench or {}).get("reference") or {}
    copy_bw = (ref.get("d2d_copy") or {}).get("bandwidth_bytes_per_s")
    lines = [
        "| (a, l, c) | precision | resident ms | products ms | polar ms | rest ms | "
        "evaluation ms | products: anchor BW | products: GEMM rate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ph = r["phases"]
        d_res = med(r, "resident")
        prod = ph.get("products")
        gemm = ((ref.get("gemm") or {}).get(r["precision"]) or {}).get("flops_per_s")
        bw = (r.get("anchor_bytes") / prod / copy_bw
              if prod and copy_bw and r.get("anchor_bytes") else None)
        flops = 2.0 * r["a"] * r["c"] * r["l"] ** 2
        rate = flops / prod / gemm if prod and gemm else None
        lines.append(
            f"| ({r['a']}, {r['l']}, {r['c']}) | {r['precision']} | {ms(d_res)} | {ms(prod)} | "
            f"{ms(ph.get('polar'))} | {ms(ph.get('rest'))} | {ms(ph.get('evaluation'))} | "
            f"{pct(bw)} | {pct(rate)} |")
    return lines


def ratio(peer, ours):
    if peer is None or ours is None or ours <= 0:
        return "-"
    return f"{peer / ours:.2f}x"


def report(bench_path, peer_path):
    bench, bench_err = load(bench_path)
    peer, peer_err = load(peer_path)
    out = ["### Reference rates (measured in the same gpu_bench run)", ""]
    out += reference_lines(bench)
    out += ["", "### Timings (medians)", ""]
    if bench_err:
        out.append(f"gpu_bench results: {bench_err}")
    elif bench.get("status") in ("no_gpu", "error") and not bench.get("results"):
        out.append(f"gpu_bench: {bench.get('status')}: {bench.get('reason', '')}")
    if peer_err:
        out.append(f"PyTorch peer results: {peer_err}")
    elif peer and peer.get("status") in ("no_gpu", "no_torch"):
        out.append(f"PyTorch peer: {peer.get('status')}: {peer.get('reason', '')}")
    out.append("")
    out += table(bench, peer)
    out += [
        "",
        "resident: anchors already in device memory, one `align_resident` call (evaluate = "
        "false) between CUDA events on the backend's stream; with upload: the same plus the "
        f"host-to-device copy of the anchors from a {host_memory(bench)} host buffer. PyTorch: "
        "the same two spans around the straightforward PyTorch code (bench/torch_peer.py), "
        f"host copy {host_memory(peer)}. peer/dcalign > 1: dcalign is faster. anchor BW: "
        "anchor bytes / resident median / measured copy bandwidth. product FLOP: 2 a c l^2 / "
        "resident median / measured GEMM rate of that precision (the flops of ODC's W^T Z; "
        "for the other methods only a scale).",
    ]
    phases = phase_table(bench)
    if phases:
        out += ["", "### ODC phase split (CUDA events, medians of 10)", ""] + phases + [
            "", "products: W^T Z, one GEMM; polar: the batched polar factors of those products; "
            "rest: the resident median less both (target A_r O, checks, rank decisions); "
            "evaluation: what evaluate = true adds (objective, orthogonality)."]
    if bench:
        machine = bench.get("machine") or {}
        gpu = machine.get("gpu") or {}
        if gpu:
            out += ["", f"GPU: {gpu.get('name')}, {gpu.get('multiprocessors')} SMs, "
                        f"{(gpu.get('memory_bytes') or 0) / 2**30:.1f} GiB; CUDA driver "
                        f"{machine.get('cuda_driver_version')}, runtime "
                        f"{machine.get('cuda_runtime_version')}; backend: "
                        f"{machine.get('backend')}"]
        if bench.get("command"):
            out.append(f"gpu_bench command: `{bench['command']}`")
    if peer:
        m = peer.get("machine") or {}
        out.append(f"PyTorch {m.get('torch')} (CUDA {m.get('cuda')}), "
                   f"preferred linalg library {m.get('preferred_linalg_library', '?')}; "
                   f"command: `{peer.get('command', '')}`")
    return "\n".join(out) + "\n"


def host_memory(doc):
    return ((doc or {}).get("parameters") or {}).get("host_memory", "?")


def counts(doc):
    """{status: number of series} of one JSON."""
    out = {}
    for r in (doc or {}).get("results") or []:
        out[r.get("status", "?")] = out.get(r.get("status", "?"), 0) + 1
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--peer")
    ap.add_argument("--counts", action="store_true",
                    help="print only the series counts per status of both files")
    args = ap.parse_args(argv)
    if args.counts:
        for name, path in (("gpu_bench", args.bench), ("torch_peer", args.peer)):
            doc, err = load(path)
            c = counts(doc)
            print(f"{name}: " + (err if err else ", ".join(f"{v} {k}" for k, v in sorted(c.items()))
                                 or "no series"))
        return 0
    sys.stdout.write(report(args.bench, args.peer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
