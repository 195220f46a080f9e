#!/usr/bin/env python3
"""Fits and speed-up tables from dcalign_sweep JSON files (paper 001, section 6).

For every file SWEEP.json it writes SWEEP.md next to it with
  - the median times per point (skipped and failed series marked),
  - the log-log fit log10(time) = kappa + alpha log10(x) per series, with R^2 (eqs. 86-89),
  - for a sweep over c, the linear fit T(c) = beta_0 + beta_1 c with beta_1's 95% confidence
    interval from the t distribution with n - 2 degrees of freedom (eqs. 90-91),
  - speed-ups of dcalign over each peer (peer median / dcalign median) per point and at the
    endpoints, and of ODC over the baselines within each implementation,
and the paper's values beside ours. With --summary FILE it also writes one Markdown file with
the fits of all given sweeps side by side and the speed-ups at every measured point.

Usage: analyze.py bench/results/cpu/sweep_*.json [--summary bench/results/cpu/SUMMARY.md]
"""

import argparse
import json
import math
import os
import sys

# Paper 001, eqs. 87-89 and 91 (its Python implementation on 4 threads of a Xeon @ 2.2 GHz).
PAPER_ALPHA = {
    "l": {"imakura": 1.26, "kawakami": 1.75, "odc": 2.05},
    "a": {"imakura": 0.79, "kawakami": 0.92, "odc": 0.56},
    "c": {"imakura": 0.95, "kawakami": 0.92, "odc": 0.84},
}
PAPER_R2 = {
    "l": {"imakura": 0.97, "kawakami": 0.99, "odc": 0.99},
    "a": {"imakura": 0.99, "kawakami": 0.998, "odc": 0.87},
    "c": {"imakura": 0.99, "kawakami": 0.98, "odc": 0.94},
}
PAPER_BETA1 = {  # s/user, 95% CI, R^2
    "imakura": (8.99e-2, (0.084, 0.096), 0.98),
    "kawakami": (4.76e-2, (0.041, 0.054), 0.94),
    "odc": (8.67e-4, (0.00066, 0.00107), 0.83),
}
METHOD_NAMES = {"odc": "ODC", "imakura": "Imakura-DC", "kawakami": "Kawakami-DC", "gopp": "GOPP"}
METHOD_ORDER = ["odc", "imakura", "kawakami", "gopp"]
SYMBOL = {"a": "a", "l": "l", "c": "c"}


# ------------------------------------------------------------------------------------------------
# Statistics (plain Python: no SciPy needed).

def _beta_continued_fraction(a, b, x):
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + num / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + num / c
        c = c if abs(c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-15:
            break
    return h


def betainc(a, b, x):
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(log_front)
    # The continued fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry
    # I_x(a, b) = 1 - I_{1-x}(b, a) on the other side.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """Student t distribution function with df degrees of freedom."""
    tail = 0.5 * betainc(0.5 * df, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p, df):
    """Quantile of the t distribution: bisection on t_cdf. Agrees with scipy.stats.t.ppf to about
    1e-9 (the accuracy of the incomplete beta function here), plenty for confidence intervals."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def linear_fit(x, y, level=0.95):
    """OLS y = beta0 + beta1 x. Returns a dict with beta0, beta1, R^2, n and, for n >= 3, the
    standard error of beta1 and its two-sided confidence interval at `level`."""
    n = len(x)
    if n < 2 or n != len(y):
        raise ValueError("linear_fit needs at least two (x, y) pairs")
    mx = sum(x) / n
    my = sum(y) / n
    sxx = sum((xi - mx) ** 2 for xi in x)
    if sxx == 0:
        raise ValueError("linear_fit: all x are equal")
    sxy = sum((xi - mx) * (yi - my) for xi, yi in zip(x, y))
    beta1 = sxy / sxx
    beta0 = my - beta1 * mx
    sse = sum((yi - beta0 - beta1 * xi) ** 2 for xi, yi in zip(x, y))
    sst = sum((yi - my) ** 2 for yi in y)
    fit = {"n": n, "beta0": beta0, "beta1": beta1,
           "r2": 1.0 - sse / sst if sst > 0 else 1.0}
    if n >= 3:
        se = math.sqrt(sse / (n - 2) / sxx)
        half = t_quantile(0.5 + level / 2.0, n - 2) * se
        fit.update({"se_beta1": se, "ci": (beta1 - half, beta1 + half), "level": level})
    return fit


def loglog_fit(x, t):
    """log10(t) = kappa + alpha log10(x) by OLS (eqs. 86-89): dict with alpha, kappa, r2, n."""
    if any(v <= 0 for v in list(x) + list(t)):
        raise ValueError("loglog_fit needs positive values")
    f = linear_fit([math.log10(v) for v in x], [math.log10(v) for v in t])
    return {"n": f["n"], "alpha": f["beta1"], "kappa": f["beta0"], "r2": f["r2"]}


# ------------------------------------------------------------------------------------------------
# Reading sweep files.

REQUIRED = {
    "document": ["schema", "parameters", "machine", "sessions", "complete", "points"],
    "parameters": ["sweep", "values", "fixed", "methods", "precisions", "backends", "peers",
                   "warmup", "repetitions", "seed", "threads", "max_seconds", "svd"],
    "machine": ["cpu", "threads", "openblas_config", "compiler", "dcalign_version", "backends",
                "gpu", "peers"],
    "session": ["started", "command"],
    "point": ["x", "a", "l", "c", "results"],
    "result": ["impl", "method", "backend", "precision", "status"],
    "result ok": ["median", "min", "max", "seconds", "warmup_seconds"],
    "result not ok": ["reason"],
}


def schema_problems(doc):
    """Missing keys of a dcalign-sweep/1 document (see bench/README.md), as readable strings."""
    problems = []

    def need(obj, what, where):
        if not isinstance(obj, dict):
            problems.append(f"{where}: not an object")
            return False
        missing = [k for k in REQUIRED[what] if k not in obj]
        problems.extend(f"{where}: missing '{k}'" for k in missing)
        return not missing

    if not need(doc, "document", "document"):
        return problems
    if doc["schema"] != "dcalign-sweep/1":
        problems.append(f"document: schema is {doc['schema']!r}, expected 'dcalign-sweep/1'")
    need(doc["parameters"], "parameters", "parameters")
    need(doc["machine"], "machine", "machine")
    for i, s in enumerate(doc["sessions"]):
        need(s, "session", f"sessions[{i}]")
    for i, p in enumerate(doc["points"]):
        if not need(p, "point", f"points[{i}]"):
            continue
        for j, r in enumerate(p["results"]):
            where = f"points[{i}].results[{j}]"
            if need(r, "result", where):
                need(r, "result ok" if r["status"] == "ok" else "result not ok", where)
    return problems


def load(path):
    with open(path) as f:
        doc = json.load(f)
    problems = schema_problems(doc)
    if problems:
        raise SystemExit(f"{path}: not a valid dcalign-sweep/1 file:\n  " + "\n  ".join(problems))
    return doc


def series_key(r):
    return (r["impl"], r["method"], r["backend"], r["precision"])


def series_label(key):
    impl, method, backend, precision = key
    name = METHOD_NAMES.get(method, method)
    where = "" if backend == "cpu" else f" {backend}"
    prec = "" if precision == "float64" else f" {precision}"
    return f"{impl} {name}{where}{prec}"


def sort_keys(keys):
    def order(k):
        impl, method, backend, precision = k
        return (impl != "dcalign", impl, METHOD_ORDER.index(method) if method in METHOD_ORDER
                else 99, backend, precision)
    return sorted(keys, key=order)


def collect(doc):
    """{series key: {x: result}} over all points, and the sorted x values."""
    table = {}
    xs = []
    for p in doc["points"]:
        xs.append(p["x"])
        for r in p["results"]:
            table.setdefault(series_key(r), {})[p["x"]] = r
    return table, sorted(xs)


def medians(series):
    """(x, median) pairs of the successful points of one series, by x."""
    return [(x, r["median"]) for x, r in sorted(series.items()) if r.get("status") == "ok"]


def fits(doc):
    """Log-log fit per series (and the linear per-user fit for a c sweep)."""
    table, _ = collect(doc)
    sweep = doc["parameters"]["sweep"]
    out = {}
    for key in sort_keys(table):
        pts = medians(table[key])
        entry = {"points": len(pts), "range": (pts[0][0], pts[-1][0]) if pts else None}
        if len(pts) >= 3:
            entry["loglog"] = loglog_fit([p[0] for p in pts], [p[1] for p in pts])
            if sweep == "c":
                entry["linear"] = linear_fit([p[0] for p in pts], [p[1] for p in pts])
        out[key] = entry
    return out


def speedups(doc):
    """[(dcalign key, peer key, [(x, ratio)])]: peer median / dcalign median per point."""
    table, _ = collect(doc)
    out = []
    for key in sort_keys(table):
        if key[0] != "dcalign":
            continue
        for peer in sort_keys(table):
            if peer[0] == "dcalign" or peer[1] != key[1] or peer[3] != key[3]:
                continue
            ratios = []
            for x, r in sorted(table[key].items()):
                q = table[peer].get(x)
                if r.get("status") == "ok" and q and q.get("status") == "ok":
                    ratios.append((x, q["median"] / r["median"]))
            out.append((key, peer, ratios))
    return out


def odc_over_baselines(doc):
    """[(impl, baseline key, [(x, ratio)])]: baseline median / ODC median, same implementation."""
    table, _ = collect(doc)
    out = []
    for key in sort_keys(table):
        if key[1] != "odc":
            continue
        for other in sort_keys(table):
            if other[1] in ("odc", "gopp") or (other[0], other[2], other[3]) != (key[0], key[2],
                                                                                 key[3]):
                continue
            ratios = []
            for x, r in sorted(table[key].items()):
                q = table[other].get(x)
                if r.get("status") == "ok" and q and q.get("status") == "ok":
                    ratios.append((x, q["median"] / r["median"]))
            out.append((key, other, ratios))
    return out


# ------------------------------------------------------------------------------------------------
# Markdown.

def fmt_s(v):
    return f"{v:.4g}"


def fmt_ratio(v):
    return f"{v:.2f}x" if v < 100 else f"{v:.0f}x"


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def describe_sweep(doc):
    p = doc["parameters"]
    fixed = ", ".join(f"{k} = {v}" for k, v in p["fixed"].items())
    return f"sweep over {p['sweep']} ({fixed})"


def load_summary(doc):
    """How busy the machine was: the 1-minute load average at the start of the points (which
    includes the sweep's own recent work) and the share of the CPUs other processes used
    during each point (measured by the driver from /proc)."""
    loads = sorted(pt["load_average_start"][0] for pt in doc["points"]
                   if pt.get("load_average_start"))
    if not loads:
        return "load not recorded"
    text = (f"1-min load average at the start of the points: min {loads[0]:.2f}, "
            f"median {loads[len(loads) // 2]:.2f}, max {loads[-1]:.2f}")
    other = sorted(pt["other_cpu_fraction"] for pt in doc["points"]
                   if "other_cpu_fraction" in pt)
    if other:
        busy = sum(1 for v in other if v > 0.1)
        text += (f"; CPU share used by other processes during a point: median "
                 f"{100 * other[len(other) // 2]:.1f}%, max {100 * other[-1]:.1f}% "
                 f"({busy} of {len(other)} points above 10%)")
    return text


def machine_lines(doc):
    m = doc.get("machine", {})
    cpu = m.get("cpu", {})
    numpy = m.get("peers", {}).get("numpy", {})
    lines = [
        f"- CPU: {cpu.get('model', '?')}, {cpu.get('logical_cpus', '?')} logical CPUs "
        f"({cpu.get('physical_cores', '?')} cores), {cpu.get('memory_gib', 0):.1f} GiB; "
        f"{m.get('os', '?')}",
        f"- threads: {m.get('threads', '?')} (dcalign's BLAS and loops over users; "
        f"OPENBLAS_NUM_THREADS of the peers)",
        f"- BLAS: {m.get('openblas_config', '?')}",
        f"- dcalign {m.get('dcalign_version', '?')} at {str(m.get('git_commit'))[:12]}"
        f"{' (library modified)' if m.get('git_dirty_library') else ''}, "
        f"{m.get('compiler', '?')}, {m.get('build_type', '?')}",
    ]
    if numpy:
        blas = numpy.get("blas", {})
        lines.append(f"- NumPy {numpy.get('numpy', '?')} on Python {numpy.get('python', '?')}, "
                     f"BLAS {blas.get('openblas_config', ', '.join(blas.get('libraries', [])))}")
    if m.get("gpu"):
        lines.append(f"- GPU: {m['gpu']}")
    return lines


def sweep_markdown(doc, name):
    p = doc["parameters"]
    sweep = p["sweep"]
    sym = SYMBOL[sweep]
    table, xs = collect(doc)
    keys = sort_keys(table)
    out = [f"# {name}: {describe_sweep(doc)}", ""]
    out += machine_lines(doc)
    out.append(f"- {p['warmup']} warm-up run(s), {p['repetitions']} timed repetitions per point; "
               f"median/min/max over the repetitions; seed {p['seed']}; time cap "
               f"{p['max_seconds']} s per point; SVD of the baselines: {p['svd']['algorithm']} "
               f"(oversampling {p['svd']['oversampling']}, "
               f"{p['svd']['power_iterations']} power iterations)")
    out.append(f"- {load_summary(doc)}")
    for s in doc.get("sessions", []):
        out.append(f"- run {s.get('started', '?')}: `{s.get('command', '?')}`")
    out.append(f"- complete: {'yes' if doc.get('complete') else 'no (points missing)'}")
    out.append("")

    out += ["## Median wall-clock time (s)", ""]
    rows = []
    for x in xs:
        row = [x]
        for k in keys:
            r = table[k].get(x)
            if r is None:
                row.append("")
            elif r.get("status") == "ok":
                row.append(fmt_s(r["median"]))
            else:
                row.append(r.get("status", "?"))
        rows.append(row)
    out.append(md_table([sym] + [series_label(k) for k in keys], rows))
    notes = []
    for k in keys:
        for x, r in sorted(table[k].items()):
            if r.get("status") != "ok":
                notes.append(f"- {series_label(k)} at {sym} = {x}: {r.get('status')}: "
                             f"{r.get('reason', '')}")
                if r.get("status") == "skipped":
                    # One line per series is enough; the reason is the same for later points.
                    break
    if notes:
        out += ["", "Not measured:", ""] + notes
    out.append("")

    f = fits(doc)
    out += [f"## Log-log fit log10(time) = kappa + alpha log10({sym}) (paper eqs. 86-89)", ""]
    rows = []
    for k in keys:
        e = f[k]
        pa = PAPER_ALPHA[sweep].get(k[1])
        pr = PAPER_R2[sweep].get(k[1])
        paper = f"{pa} (R^2 {pr})" if pa is not None else ""
        if "loglog" in e:
            ll = e["loglog"]
            rows.append([series_label(k), f"{e['range'][0]}..{e['range'][1]}", e["points"],
                         f"{ll['alpha']:.3f}", f"{ll['r2']:.4f}", f"{ll['kappa']:.3f}", paper])
        else:
            rows.append([series_label(k), "", e["points"], "(fewer than 3 points)", "", "",
                         paper])
    out.append(md_table(["series", f"{sym} range", "points", "alpha", "R^2", "kappa",
                         "paper alpha (R^2)"], rows))
    out.append("")

    if sweep == "c":
        out += ["## Per-user slope T(c) = beta_0 + beta_1 c (paper eqs. 90-91)", ""]
        rows = []
        for k in keys:
            e = f[k]
            pb = PAPER_BETA1.get(k[1])
            paper = (f"{pb[0]:.3g} [{pb[1][0]:.3g}, {pb[1][1]:.3g}] (R^2 {pb[2]})" if pb
                     else "")
            if "linear" in e:
                lf = e["linear"]
                rows.append([series_label(k), f"{lf['beta1']:.4g}",
                             f"[{lf['ci'][0]:.4g}, {lf['ci'][1]:.4g}]", f"{lf['beta0']:.4g}",
                             f"{lf['r2']:.4f}", paper])
            else:
                rows.append([series_label(k), "(fewer than 3 points)", "", "", "", paper])
        out.append(md_table(["series", "beta_1 (s/user)", "95% CI", "beta_0 (s)", "R^2",
                             "paper beta_1 [95% CI] (R^2)"], rows))
        out.append("")

    sp = speedups(doc)
    if sp:
        out += ["## Speed-up of dcalign over the peers (peer median / dcalign median)", ""]
        all_x = sorted({x for _, _, r in sp for x, _ in r})
        rows = []
        for x in all_x:
            row = [x]
            for _, _, ratios in sp:
                d = dict(ratios)
                row.append(fmt_ratio(d[x]) if x in d else "")
            rows.append(row)
        out.append(md_table([sym] + [f"{series_label(k)} vs {p_[0]}" for k, p_, _ in sp],
                            rows))
        out.append("")
        rows = []
        for k, peer, ratios in sp:
            if ratios:
                rows.append([series_label(k), series_label(peer),
                             f"{fmt_ratio(ratios[0][1])} at {sym} = {ratios[0][0]}",
                             f"{fmt_ratio(ratios[-1][1])} at {sym} = {ratios[-1][0]}"])
        out += ["Endpoints:", "", md_table(["dcalign", "peer", "first point", "last point"],
                                           rows), ""]

    ob = odc_over_baselines(doc)
    if ob:
        out += ["## ODC speed-up over the baselines (baseline median / ODC median, same "
                "implementation)", ""]
        rows = []
        for k, other, ratios in ob:
            if ratios:
                rows.append([series_label(other), series_label(k),
                             f"{fmt_ratio(ratios[0][1])} at {sym} = {ratios[0][0]}",
                             f"{fmt_ratio(ratios[-1][1])} at {sym} = {ratios[-1][0]}",
                             f"{fmt_ratio(min(r for _, r in ratios))} .. "
                             f"{fmt_ratio(max(r for _, r in ratios))}"])
        out.append(md_table(["baseline", "ODC", "first point", "last point", "range"], rows))
        out.append("")
    return "\n".join(out)


def summary_markdown(docs):
    """Fits of every sweep side by side, and the speed-ups at every measured point."""
    out = ["# Summary of the sweeps", ""]
    if docs:
        out += machine_lines(docs[0][1]) + [""]
    rows = []
    for name, doc in docs:
        sweep = doc["parameters"]["sweep"]
        for k, e in fits(doc).items():
            if "loglog" not in e:
                continue
            pa = PAPER_ALPHA[sweep].get(k[1])
            rows.append([f"alpha_{sweep}", series_label(k), f"{e['loglog']['alpha']:.3f}",
                         f"{e['loglog']['r2']:.4f}", e["points"],
                         "" if pa is None else pa])
    out += ["## Fitted exponents", "",
            md_table(["exponent", "series", "alpha", "R^2", "points", "paper"], rows), ""]
    rows = []
    for name, doc in docs:
        if doc["parameters"]["sweep"] != "c":
            continue
        for k, e in fits(doc).items():
            if "linear" in e:
                lf = e["linear"]
                pb = PAPER_BETA1.get(k[1])
                rows.append([series_label(k), f"{lf['beta1']:.4g}",
                             f"[{lf['ci'][0]:.4g}, {lf['ci'][1]:.4g}]", f"{lf['r2']:.4f}",
                             "" if not pb else f"{pb[0]:.3g} [{pb[1][0]:.3g}, {pb[1][1]:.3g}]"])
    if rows:
        out += ["## Per-user slope beta_1 (c sweep)", "",
                md_table(["series", "beta_1 (s/user)", "95% CI", "R^2", "paper"], rows), ""]
    out += point_speedups(docs)
    return "\n".join(out)


def point_speedups(docs):
    """Median times and dcalign-vs-peer ratios at every (a, l, c) measured in any file."""
    seen = {}
    for name, doc in docs:
        for p in doc["points"]:
            shape = (p["a"], p["l"], p["c"])
            if shape in seen:
                continue
            seen[shape] = (name, p)
    rows = []
    for shape in sorted(seen):
        name, p = seen[shape]
        by = {series_key(r): r for r in p["results"]}
        for key in sort_keys(by):
            if key[0] != "dcalign":
                continue
            r = by[key]
            for peer in sort_keys(by):
                if peer[0] == "dcalign" or peer[1] != key[1] or peer[3] != key[3]:
                    continue
                q = by[peer]
                ok = r.get("status") == "ok" and q.get("status") == "ok"
                load = p.get("load_average_start") or [float("nan")]
                other = p.get("other_cpu_fraction")
                rows.append([f"({shape[0]}, {shape[1]}, {shape[2]})", series_label(key),
                             fmt_s(r["median"]) if r.get("status") == "ok" else r.get("status"),
                             fmt_s(q["median"]) if q.get("status") == "ok" else q.get("status"),
                             fmt_ratio(q["median"] / r["median"]) if ok else "",
                             len(r.get("seconds", [])), f"{load[0]:.2f}",
                             "" if other is None else f"{100 * other:.1f}%", name])
    if not rows:
        return []
    return ["## dcalign vs peer at every measured point (median seconds)", "",
            "Load: 1-minute load average at the start of the point (includes the sweep's own "
            "work just before); others: share of the CPUs used by other processes while the "
            "point was measured.", "",
            md_table(["(a, l, c)", "series", "dcalign", "peer", "speed-up", "reps",
                      "load", "others", "file"], rows), ""]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="dcalign_sweep JSON files")
    ap.add_argument("--summary", help="also write a combined Markdown summary here")
    args = ap.parse_args(argv)
    docs = []
    for path in args.files:
        doc = load(path)
        name = os.path.splitext(os.path.basename(path))[0]
        md = os.path.splitext(path)[0] + ".md"
        with open(md, "w") as f:
            f.write(sweep_markdown(doc, name) + "\n")
        print(f"wrote {md}", file=sys.stderr)
        docs.append((name, doc))
    if args.summary:
        with open(args.summary, "w") as f:
            f.write(summary_markdown(docs) + "\n")
        print(f"wrote {args.summary}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
