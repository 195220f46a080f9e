#!/usr/bin/env python3
"""ODC against batched NumPy: raw per-point JSON for bench/run_odc_vs_numpy_batched.sh, and its SUMMARY.md with the goals.

Two subcommands (the script calls both; neither is timed):

  numpy_batched_summary.py assemble --name N --a A --l L --c C --runs TSV --reports DIR
                              --peer PEER.json --out POINT.json [--anchors F] [--seed S]
                              [--warmup W] [--repetitions R] [--dcalign-command "..."]
      TSV has one line per dcalign process: KIND (warmup|run), INDEX, start and end of
      $EPOCHREALTIME, exit status; DIR holds report_KIND_INDEX.json and stderr_KIND_INDEX.txt.
  numpy_batched_summary.py summarize OUT_DIR [--run RUN.json] [--summary SUMMARY.md]
      reads OUT_DIR/<point>.json (schema dcalign-issue27-point/1), writes the table and the
      goal verdicts (PASS/MISS/N/A), and prints the verdicts.

dcalign's time of a run is the report's `seconds.total` (validation, target, product, polar
factors and the default evaluation; not the file read or write); its whole-process time is the
wall time of the `dcalign align` process from the shell. NumPy's are the peer's
(bench/numpy_batched_peer.py) `batched_odc` and `gemm_floor` medians.
"""

import argparse
import glob
import json
import os
import re
import statistics
import sys

POINT_SCHEMA = "dcalign-issue27-point/1"

# name -> (a, l, c); the first three are paper 001's Fig. 6 points.
POINTS = {
    "f6a": (20000, 50, 50),
    "f6c": (1000, 50, 1000),
    "f6l": (1000, 500, 50),
    "l950": (1000, 950, 50),
    "base": (1000, 50, 50),
    "small": (400, 8, 4),
}
FIG6 = ("f6a", "f6c", "f6l")
SPEEDUP_GOAL = 2.0          # NumPy batched / dcalign alignment, at least, at every Fig. 6 point
GEMM_POINT = "f6a"
GEMM_GOAL = 1.3             # dcalign alignment / NumPy GEMM floor, at most, at GEMM_POINT
SMALL_POINT = "small"
SMALL_WALL_GOAL = 0.015     # dcalign whole-process median, seconds, at most
BUSY_WARN = 0.15            # others' CPU use before a point above which the summary warns


# ----------------------------------------------------------------------------- assemble

def parse_read_seconds(stderr_text):
    """The CLI's '(read X s)' figure from its stderr line, or None."""
    m = re.search(r"\(read ([0-9.eE+-]+) s\)", stderr_text or "")
    return float(m.group(1)) if m else None


def reported_blas(report, version_text=None):
    """What dcalign itself names as its BLAS: a `backend` or `blas` field of the report, else
    a line of `dcalign --version` that mentions BLAS; None when it names none."""
    for key in ("backend", "blas"):
        if report and report.get(key):
            return report[key]
    for line in (version_text or "").splitlines():
        if "blas" in line.lower():
            return line.strip()
    return None


def format_blas(blas):
    """One line for what dcalign reports as its BLAS (a string, or the report's `blas` object)."""
    if not blas:
        return "not reported"
    if isinstance(blas, dict):
        parts = [f"{k} {blas[k]}" for k in ("library", "kernels", "chosen_by", "threads", "cpu")
                 if blas.get(k) not in (None, "")]
        return "; ".join(parts) or json.dumps(blas)
    return str(blas)


def _epoch(text):
    return float(text.replace(",", "."))  # $EPOCHREALTIME follows LC_NUMERIC


def _loads(text):
    return [float(x) for x in text.split()] if text else None


def assemble(args):
    runs = {"warmup": [], "run": []}
    last_report = None
    with open(args.runs) as f:
        for line in f:
            if not line.strip():
                continue
            kind, index, start, end, rc = line.split()
            entry = {"index": int(index), "wall_seconds": _epoch(end) - _epoch(start),
                     "exit_status": int(rc)}
            rpath = os.path.join(args.reports, f"report_{kind}_{index}.json")
            spath = os.path.join(args.reports, f"stderr_{kind}_{index}.txt")
            stderr_text = open(spath).read() if os.path.exists(spath) else ""
            entry["stderr"] = stderr_text.strip()
            entry["read_seconds"] = parse_read_seconds(stderr_text)
            if int(rc) == 0 and os.path.exists(rpath):
                with open(rpath) as rf:
                    report = json.load(rf)
                entry["report_seconds"] = report.get("seconds")
                entry["alignment_seconds"] = (report.get("seconds") or {}).get("total")
                last_report = report
            else:
                entry["alignment_seconds"] = None
            runs[kind].append(entry)
    with open(args.peer) as f:
        peer = json.load(f)
    doc = {
        "schema": POINT_SCHEMA,
        "name": args.name, "a": args.a, "l": args.l, "c": args.c,
        "anchors_file": args.anchors, "anchor_seed": args.seed,
        "warmup": args.warmup, "repetitions": args.repetitions, "run_started": args.started,
        "load_average_start": _loads(args.load_start),
        "load_average_end": _loads(args.load_end),
        "others_busy_start": args.busy_start, "others_busy_end": args.busy_end,
        "order": "interleaved: dcalign process, one NumPy repetition, dcalign process, ...",
        "dcalign": {
            "command": args.dcalign_command,
            "alignment_time": "report seconds.total",
            "warmup": runs["warmup"], "runs": runs["run"],
            "report_fields": sorted(last_report) if last_report else None,
            "blas_reported": reported_blas(last_report),
            "last_report": last_report,
        },
        "numpy": peer,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    failed = [r for r in runs["warmup"] + runs["run"] if r["exit_status"] != 0]
    return 1 if failed else 0


# ----------------------------------------------------------------------------- summarize

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _ratio(num, den):
    return num / den if num is not None and den else None


def point_row(doc):
    """Medians and ratios of one point document."""
    runs = doc["dcalign"]["runs"]
    ok = [r for r in runs if r.get("exit_status", 0) == 0]
    peer = doc.get("numpy") or {}
    row = {
        "name": doc["name"], "a": doc["a"], "l": doc["l"], "c": doc["c"],
        "dcalign_runs": len(ok), "dcalign_failed": len(runs) - len(ok),
        "numpy_runs": len((peer.get("batched_odc") or {}).get("seconds") or []),
        "dcalign_align": median([r.get("alignment_seconds") for r in ok]),
        "dcalign_wall": median([r.get("wall_seconds") for r in ok]),
        "numpy_batched": median((peer.get("batched_odc") or {}).get("seconds") or []),
        "numpy_gemm": median((peer.get("gemm_floor") or {}).get("seconds") or []),
        "numpy_product": (peer.get("product") or {}).get("chosen"),
    }
    row["numpy_over_dcalign"] = _ratio(row["numpy_batched"], row["dcalign_align"])
    row["numpy_over_dcalign_wall"] = _ratio(row["numpy_batched"], row["dcalign_wall"])
    row["dcalign_over_gemm"] = _ratio(row["dcalign_align"], row["numpy_gemm"])
    row["others_busy"] = max((v for v in (doc.get("others_busy_start"),
                                          doc.get("others_busy_end")) if v is not None),
                             default=None)
    row["issue_size"] = POINTS.get(doc["name"]) == (doc["a"], doc["l"], doc["c"])
    return row


def _verdict(row, value, ok):
    if row is None:
        return "N/A", "not run"
    if not row["issue_size"]:
        return "N/A", "size (%d, %d, %d) is not the issue's" % (row["a"], row["l"], row["c"])
    if value is None:
        return "N/A", "no measurement"
    return ("PASS" if ok(value) else "MISS"), None


def evaluate_goals(rows):
    """Goal verdicts from point rows (dicts of point_row, keyed by name).

    Returns a list of {"id" (speedup, gemm, small_wall), "goal", "point", "value",
    "threshold", "verdict", "note", "binding"};
    binding is False for the points reported only for information."""
    goals = []

    def add(gid, goal, name, value_key, threshold, ok, binding=True):
        row = rows.get(name)
        value = row.get(value_key) if row else None
        verdict, note = _verdict(row, value, ok)
        goals.append({"id": gid, "goal": goal, "point": name, "value": value,
                      "threshold": threshold, "verdict": verdict, "note": note,
                      "binding": binding})

    for name in FIG6:
        add("speedup", "NumPy batched / dcalign >= 2", name, "numpy_over_dcalign",
            SPEEDUP_GOAL, lambda v: v >= SPEEDUP_GOAL)
    for name in ("l950", "base"):
        add("speedup", "NumPy batched / dcalign >= 2", name, "numpy_over_dcalign",
            SPEEDUP_GOAL, lambda v: v >= SPEEDUP_GOAL, binding=False)
    add("gemm", "dcalign / NumPy GEMM floor <= 1.3", GEMM_POINT, "dcalign_over_gemm",
        GEMM_GOAL, lambda v: v <= GEMM_GOAL)
    add("small_wall", "dcalign whole-process median <= 15 ms", SMALL_POINT, "dcalign_wall",
        SMALL_WALL_GOAL, lambda v: v <= SMALL_WALL_GOAL)
    return goals


def overall(goals):
    """PASS when every binding goal passes, MISS when one misses, else N/A (incomplete)."""
    verdicts = [g["verdict"] for g in goals if g["binding"]]
    if "MISS" in verdicts:
        return "MISS"
    if verdicts and all(v == "PASS" for v in verdicts):
        return "PASS"
    return "N/A"


def _fmt_s(v):
    if v is None:
        return "-"
    return f"{v * 1e3:.2f} ms" if v < 1 else f"{v:.3f} s"


def _fmt_x(v):
    return "-" if v is None else f"{v:.2f}x"


def goal_lines(goals):
    out = []
    for g in goals:
        v = g["value"]
        if g["id"] == "small_wall":
            shown = _fmt_s(v)
        else:
            shown = _fmt_x(v)
        tag = "" if g["binding"] else " (not a goal; reported)"
        note = f" ({g['note']})" if g["note"] else ""
        out.append(f"{g['verdict']}: {g['goal']} at {g['point']}: {shown}{note}{tag}")
    out.append(f"{overall(goals)}: all goals")
    return out


def order_key(doc):
    names = list(POINTS)
    return (names.index(doc["name"]) if doc["name"] in names else len(names), doc["name"])


def _header(run):
    if not run:
        return []
    cpu = run.get("cpu") or {}
    dc = run.get("dcalign") or {}
    npy = run.get("numpy") or {}
    ob = (npy.get("blas") or {}).get("openblas") or {}
    removed = ", ".join(f"{k}={v}" for k, v in (run.get("env_removed") or {}).items())
    lines = [
        f"- CPU: {cpu.get('model', '?')}; avx512f: {'yes' if cpu.get('avx512f') else 'no'}; "
        f"{cpu.get('cores', '?')} logical CPUs",
        f"- dcalign: `{dc.get('binary', '?')}`; BLAS as dcalign names it (report `backend`/"
        f"`blas`, `--version`): {format_blas(dc.get('blas_reported'))}",
        f"- Debian OpenBLAS that dcalign loads (found by the script, not by dcalign): "
        f"{dc.get('openblas_package') or '?'}, `{dc.get('openblas_library') or '?'}`, "
        f"config `{dc.get('openblas_config') or '?'}`, kernel set "
        f"{dc.get('openblas_corename') or '?'}",
        f"- NumPy {npy.get('numpy', '?')} from PyPI (venv `{run.get('venv', '?')}`, Python "
        f"{npy.get('python', '?')}, threadpoolctl {(npy.get('blas') or {}).get('threadpoolctl')}"
        f"): OpenBLAS {ob.get('version', '?')}, kernel set {ob.get('architecture', '?')}, "
        f"{ob.get('num_threads', '?')} threads ({ob.get('threading_layer', '?')})",
        f"- Environment: no BLAS/OpenMP variable set for either side; removed from the "
        f"caller's environment: {removed or 'none were set'}",
        f"- Command: `{run.get('command', '?')}`",
    ]
    if run.get("quick"):
        lines.insert(0, "- **QUICK smoke test**: tiny sizes, few repetitions; the goals are "
                        "N/A except where a point has the issue's size")
    return lines


def summarize(docs, run=None):
    """(markdown text, rows, goals) for a list of point documents."""
    docs = sorted(docs, key=order_key)
    rows = {d["name"]: point_row(d) for d in docs}
    goals = evaluate_goals(rows)
    md = ["# dcalign ODC against batched NumPy from PyPI", ""]
    md += _header(run)
    md += ["", "dcalign: `dcalign align --method odc` (float64, default evaluation), one process "
           "per run; alignment = the report's `seconds.total`, whole process = wall time of the "
           "process. NumPy: `bench/numpy_batched_peer.py` (einsum/matmul product, batched SVD); "
           "GEMM floor = the product W^T Z alone. Runs interleaved; medians.", "",
           "| point | (a, l, c) | runs dcalign / NumPy | dcalign alignment | dcalign whole "
           "process | NumPy batched | NumPy GEMM floor | NumPy product | NumPy / dcalign | "
           "dcalign / GEMM floor | others' CPU use |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in docs:
        r = rows[d["name"]]
        failed = f" ({r['dcalign_failed']} failed)" if r["dcalign_failed"] else ""
        md.append(f"| {r['name']} | ({r['a']}, {r['l']}, {r['c']}) | {r['dcalign_runs']}"
                  f"{failed} / {r['numpy_runs']} | {_fmt_s(r['dcalign_align'])} | "
                  f"{_fmt_s(r['dcalign_wall'])} | {_fmt_s(r['numpy_batched'])} | "
                  f"{_fmt_s(r['numpy_gemm'])} | {r['numpy_product'] or '-'} | "
                  f"{_fmt_x(r['numpy_over_dcalign'])} | {_fmt_x(r['dcalign_over_gemm'])} | "
                  f"{'-' if r['others_busy'] is None else '%.0f%%' % (100 * r['others_busy'])} |")
    busy = [n for n, r in rows.items() if r["others_busy"] is not None
            and r["others_busy"] > BUSY_WARN]
    if busy:
        md += ["", f"**Warning**: other processes used more than {BUSY_WARN:.0%} of the CPUs "
               f"just before or after {', '.join(busy)} (last column: busy fraction of all CPUs "
               "over 1 s while this script idled); those timings are not those of a quiet "
               "machine."]
    if run and run.get("started"):
        older = [d["name"] for d in docs if d.get("run_started") != run["started"]]
        if older:
            md += ["", "Points from an earlier run of the script (their own `run_started` in "
                   f"their JSON; the header above is this run's): {', '.join(older)}"]
    md += ["", "NumPy / dcalign compares NumPy's batched time with dcalign's alignment time "
           "(neither includes reading the anchors). Goals:", "", "```"]
    md += goal_lines(goals)
    md += ["```", ""]
    return "\n".join(md), rows, goals


def load_points(out_dir):
    docs = []
    for path in sorted(glob.glob(os.path.join(out_dir, "*.json"))):
        with open(path) as f:
            try:
                doc = json.load(f)
            except json.JSONDecodeError:
                continue
        if isinstance(doc, dict) and doc.get("schema") == POINT_SCHEMA:
            docs.append(doc)
    return docs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("assemble")
    a.add_argument("--name", required=True)
    for k in ("a", "l", "c"):
        a.add_argument(f"--{k}", type=int, required=True)
    a.add_argument("--runs", required=True)
    a.add_argument("--reports", required=True)
    a.add_argument("--peer", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--anchors")
    a.add_argument("--seed", type=int)
    a.add_argument("--warmup", type=int)
    a.add_argument("--repetitions", type=int)
    a.add_argument("--dcalign-command")
    a.add_argument("--load-start", help="/proc/loadavg's first three fields before the point")
    a.add_argument("--load-end", help="the same after it")
    a.add_argument("--busy-start", type=float,
                   help="fraction of the CPUs busy (others) over 1 s before the point")
    a.add_argument("--busy-end", type=float, help="the same after it")
    a.add_argument("--started", help="run.json's `started`, to tell points of other runs apart")
    s = sub.add_parser("summarize")
    s.add_argument("out_dir")
    s.add_argument("--run")
    s.add_argument("--summary")
    args = ap.parse_args(argv)
    if args.cmd == "assemble":
        return assemble(args)
    run = None
    if args.run:
        with open(args.run) as f:
            run = json.load(f)
    text, _, goals = summarize(load_points(args.out_dir), run)
    if args.summary:
        with open(args.summary, "w") as f:
            f.write(text)
    print("\n".join(goal_lines(goals)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
