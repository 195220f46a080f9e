#!/usr/bin/env bash
# `dcalign align --method odc` (float64, default evaluation) against batched
# NumPy from PyPI (its current wheel and the OpenBLAS inside it), each run as a user runs it:
# no BLAS or OpenMP environment variable for either side (the ones the caller has set are
# removed here and recorded in run.json).
#
# Points (a, l, c): f6a (20000, 50, 50), f6c (1000, 50, 1000), f6l (1000, 500, 50) (paper 001
# Fig. 6), l950 (1000, 950, 50), base (1000, 50, 50), small (400, 8, 4). Anchors: standard
# normal, shape (c, a, l), from default_rng([SEED, a, l, c]), written once to SCRATCH as .npy
# (never into the repository); dcalign and NumPy read the same file.
#
# Per point: the NumPy peer (bench/numpy_batched_peer.py) starts once, loads the file, picks its
# product form and warms up; dcalign runs WARMUP untimed processes; then, REPS times, one
# dcalign process (whole-process wall time from $EPOCHREALTIME, and the report's seconds.total
# as its alignment time) followed by one NumPy repetition (batched ODC and the GEMM floor), so
# both sides see the same machine state. Results: OUT/<point>.json (all raw times), OUT/run.json
# (machine, libraries, command), OUT/SUMMARY.md (table and PASS/MISS of the goals).
#
# Usage: bench/run_odc_vs_numpy_batched.sh [--points small,f6a,f6c,f6l,l950,base] [--reps N] [--warmup N]
#                             [--quick]
#   --reps N     timed runs per point on each side (default 5, and 30 for small)
#   --warmup N   untimed runs per point on each side (default 1)
#   --quick      smoke test: tiny sizes (small keeps its size), 3 runs (small 5); results go to
#                SCRATCH/quick-results (emptied first) unless OUT is set
# OUT keeps the point files of earlier runs: SUMMARY.md covers every <point>.json in OUT and names
# the points that an earlier run measured.
# Environment (none of it reaches dcalign or NumPy):
#   DCALIGN_BUILD  build directory holding src/cli/dcalign (default: build)
#   SCRATCH        anchors and per-run files (default /tmp/dcalign-issue27)
#   OUT            results (default bench/results/issue27)
#   PYTHON         interpreter that creates the venv (default python3)
#   VENV           the venv (default bench/.venv-pypi; created with numpy and threadpoolctl)
#   SEED           anchor and NumPy O seed (default 20240601); dcalign keeps its default seed
#   SETTLE         seconds the peer idles after each repetition (default 0.25)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
command_line="bench/run_odc_vs_numpy_batched.sh${*:+ $*}"
die() { echo "run_odc_vs_numpy_batched: $1" >&2; exit "${2:-1}"; }

# What a user has: no BLAS/OpenMP settings. Remove any the caller has, and record them.
removed=()
for v in OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS OPENBLAS_DEFAULT_NUM_THREADS GOTO_NUM_THREADS \
         OPENBLAS_VERBOSE OMP_NUM_THREADS OMP_PROC_BIND OMP_PLACES OMP_DYNAMIC MKL_NUM_THREADS \
         DCALIGN_CPU_ISA DCALIGN_BLAS_KERNELS; do
  if [[ -n ${!v+x} ]]; then
    removed+=("$v=${!v}")
    unset "$v"
  fi
done

points=small,f6a,f6c,f6l,l950,base
reps=
warmup=1
quick=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --points) points=$2; shift 2 ;;
    --points=*) points=${1#*=}; shift ;;
    --reps) reps=$2; shift 2 ;;
    --reps=*) reps=${1#*=}; shift ;;
    --warmup) warmup=$2; shift 2 ;;
    --warmup=*) warmup=${1#*=}; shift ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" 2 ;;
  esac
done
[[ -z $reps || $reps =~ ^[1-9][0-9]*$ ]] || die "--reps must be >= 1" 2
[[ $warmup =~ ^[0-9]+$ ]] || die "--warmup must be >= 0" 2

build=${DCALIGN_BUILD:-$root/build}
dcalign=$build/src/cli/dcalign
scratch=${SCRATCH:-/tmp/dcalign-issue27}
if ((quick)); then out=${OUT:-$scratch/quick-results}; else out=${OUT:-$here/results/issue27}; fi
venv=${VENV:-$here/.venv-pypi}
seed=${SEED:-20240601}
settle=${SETTLE:-0.25}
py=${PYTHON:-python3}
[[ -x $dcalign ]] || die "$dcalign not found (build first, or set DCALIGN_BUILD)"
case $scratch/ in "$root"/*) die "SCRATCH must be outside the repository" 2 ;; esac
mkdir -p "$scratch" "$out"
if ((quick)) && [[ -z ${OUT:-} ]]; then rm -f "$out"/*.json "$out/SUMMARY.md"; fi

declare -A size=(
  [f6a]="20000 50 50" [f6c]="1000 50 1000" [f6l]="1000 500 50"
  [l950]="1000 950 50" [base]="1000 50 50" [small]="400 8 4")
if ((quick)); then
  size=([f6a]="2000 10 5" [f6c]="100 10 100" [f6l]="100 40 5"
        [l950]="100 60 5" [base]="100 10 5" [small]="400 8 4")
fi
IFS=, read -r -a point_list <<<"$points"
for p in "${point_list[@]}"; do
  [[ -n ${size[$p]+x} ]] || die "unknown point '$p' (small f6a f6c f6l l950 base)" 2
done
echo "run_odc_vs_numpy_batched: removed from the environment: ${removed[*]:-(none were set)}"

# --- NumPy from PyPI in its own venv.
vpy=$venv/bin/python
if [[ ! -x $vpy ]]; then
  echo "run_odc_vs_numpy_batched: creating $venv ($py -m venv)"
  "$py" -m venv "$venv"
fi
if ! "$vpy" -c 'import numpy, threadpoolctl' 2>/dev/null; then
  echo "run_odc_vs_numpy_batched: pip install numpy threadpoolctl (PyPI, latest)"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$vpy" -m pip install --quiet numpy threadpoolctl
fi
"$vpy" -m pip freeze --all >"$scratch/pip-freeze.txt"
"$vpy" "$here/numpy_batched_peer.py" --describe >"$scratch/numpy-describe.json"

# --- Anchors (untimed, once per size and seed).
anchor_file() {  # anchor_file A L C -> path (creates it when missing)
  local f=$scratch/anchors_a$1_l$2_c$3_seed$seed.npy
  if [[ ! -s $f ]]; then
    echo "run_odc_vs_numpy_batched: generating $f" >&2
    "$vpy" - "$f" "$1" "$2" "$3" "$seed" <<'EOF'
import os, sys
import numpy as np
path, a, l, c, seed = sys.argv[1], *map(int, sys.argv[2:])
x = np.random.default_rng([seed, a, l, c]).standard_normal((c, a, l))
tmp = path + ".tmp.npy"
np.save(tmp, x)
os.replace(tmp, path)
EOF
  fi
  echo "$f"
}

# --- Machine and the BLAS each side loads.
probe=$(anchor_file 20 3 2)
"$dcalign" align --method odc --anchors "$probe" --out "$scratch/probe_G.npy" \
  --report "$scratch/probe_report.json" 2>/dev/null
version_text=$("$dcalign" --version 2>&1 || true)
openblas_lib=$(ldd "$dcalign" | awk '/libopenblas/ {print $3; exit}')
openblas_real=${openblas_lib:+$(readlink -f "$openblas_lib")}
openblas_pkg=
if [[ -n $openblas_real ]] &&
   pkg=$(dpkg -S "$openblas_real" 2>/dev/null | head -1 | cut -d: -f1); then
  openblas_pkg="$pkg $(dpkg-query -W -f '${Version}' "$pkg" 2>/dev/null || true)"
fi
cpu_model=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
avx512f=0; grep -qw avx512f /proc/cpuinfo && avx512f=1
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
I27_OUT=$out/run.json I27_HERE=$here I27_LIB=$openblas_real I27_PKG=$openblas_pkg \
I27_SCRATCH=$scratch I27_VENV=$venv I27_COMMAND=$command_line I27_QUICK=$quick \
I27_POINTS=$points I27_SEED=$seed I27_SETTLE=$settle I27_STARTED=$started \
I27_REMOVED=$(printf '%s\n' "${removed[@]}") I27_CPU=$cpu_model I27_AVX512F=$avx512f \
I27_NPROC=$(nproc) I27_ONLINE=$(getconf _NPROCESSORS_ONLN) I27_DCALIGN=$dcalign \
I27_VERSION=$version_text "$vpy" - <<'EOF'
import ctypes, json, os, sys
e = os.environ
sys.path.insert(0, e["I27_HERE"])
from numpy_batched_summary import reported_blas
lib = e["I27_LIB"]
config = corename = None
if lib:
    try:
        h = ctypes.CDLL(lib)
        h.openblas_get_config.restype = ctypes.c_char_p
        config = h.openblas_get_config().decode()
        h.openblas_get_corename.restype = ctypes.c_char_p
        corename = h.openblas_get_corename().decode()
    except (OSError, AttributeError) as err:
        corename = corename or f"unknown ({err})"
scratch = e["I27_SCRATCH"]
with open(os.path.join(scratch, "probe_report.json")) as f:
    report = json.load(f)
with open(os.path.join(scratch, "numpy-describe.json")) as f:
    numpy_describe = json.load(f)
with open(os.path.join(scratch, "pip-freeze.txt")) as f:
    pip_freeze = f.read().split()
run = {
    "schema": "dcalign-issue27-run/1",
    "command": e["I27_COMMAND"], "started": e["I27_STARTED"],
    "quick": e["I27_QUICK"] == "1", "points": e["I27_POINTS"], "seed": int(e["I27_SEED"]),
    "settle_seconds": float(e["I27_SETTLE"]), "scratch": scratch, "venv": e["I27_VENV"],
    "env_removed": dict(x.split("=", 1) for x in e["I27_REMOVED"].splitlines() if x),
    "cpu": {"model": e["I27_CPU"], "avx512f": e["I27_AVX512F"] == "1",
            "cores": int(e["I27_NPROC"]), "online": int(e["I27_ONLINE"])},
    "dcalign": {"binary": e["I27_DCALIGN"], "version_output": e["I27_VERSION"],
                "report_fields": sorted(report),
                "blas_reported": reported_blas(report, e["I27_VERSION"]),
                "openblas_library": lib or None, "openblas_package": e["I27_PKG"] or None,
                "openblas_config": config, "openblas_corename": corename},
    "numpy": numpy_describe,
    "pip_freeze": pip_freeze,
}
with open(e["I27_OUT"], "w") as f:
    json.dump(run, f, indent=1, default=str)
    f.write("\n")
EOF

# --- The points.
peer_pid=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() { [[ -n $peer_pid ]] && kill "$peer_pid" 2>/dev/null; true; }
trap cleanup EXIT

busy_fraction() {  # fraction of all CPUs busy over one second while this script idles
  local a b
  a=$(awk '/^cpu / {print $2+$3+$4+$6+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
  sleep 1
  b=$(awk '/^cpu / {print $2+$3+$4+$6+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {split(a, x, " "); split(b, y, " ");
    d = y[2] - x[2]; printf "%.3f\n", (d > 0) ? (y[1] - x[1]) / d : 0}'
}

dcalign_run() {  # dcalign_run KIND INDEX; uses f, work, name, to_peer, from_peer
  local rc=0 t0 t1
  t0=$EPOCHREALTIME
  "$dcalign" align --method odc --anchors "$f" --out "$work/G.npy" \
    --report "$work/report_$1_$2.json" >/dev/null 2>"$work/stderr_$1_$2.txt" \
    {to_peer}>&- {from_peer}<&- || rc=$?
  t1=$EPOCHREALTIME
  echo "$1 $2 $t0 $t1 $rc" >>"$work/runs.tsv"
  ((rc == 0)) || echo "run_odc_vs_numpy_batched: dcalign failed ($rc) at $name:" \
    "$(cat "$work/stderr_$1_$2.txt")" >&2
}

failed=0
for name in "${point_list[@]}"; do
  read -r a l c <<<"${size[$name]}"
  if [[ -n $reps ]]; then n=$reps; elif ((quick)); then
    n=3; [[ $name == small ]] && n=5
  else
    n=5; [[ $name == small ]] && n=30
  fi
  f=$(anchor_file "$a" "$l" "$c")
  work=$scratch/runs/$name
  rm -rf "$work"; mkdir -p "$work"
  echo "run_odc_vs_numpy_batched: $name (a, l, c) = ($a, $l, $c): $n interleaved runs, warm-up $warmup"
  load_start=$(cut -d' ' -f1-3 /proc/loadavg)
  busy_start=$(busy_fraction)

  coproc PEER { exec "$vpy" "$here/numpy_batched_peer.py" --anchors "$f" --warmup "$warmup" \
    --repetitions "$n" --seed "$seed" --step-stdin --settle "$settle" --json "$work/peer.json"; }
  # shellcheck disable=SC2153  # PEER_PID is set by coproc
  peer_pid=$PEER_PID
  exec {to_peer}>&"${PEER[1]}" {from_peer}<&"${PEER[0]}"
  if ! read -r line <&"$from_peer" || [[ $line != ready ]]; then
    die "the NumPy peer did not start at $name"
  fi

  for ((i = 0; i < warmup; i++)); do dcalign_run warmup "$i"; done
  for ((i = 0; i < n; i++)); do
    dcalign_run run "$i"
    echo go >&"$to_peer"
    if ! read -r line <&"$from_peer" || [[ $line != done* ]]; then
      die "the NumPy peer stopped at $name, repetition $i"
    fi
  done
  exec {to_peer}>&- {from_peer}<&-
  wait "$peer_pid" || die "the NumPy peer failed at $name"
  peer_pid=
  load_end=$(cut -d' ' -f1-3 /proc/loadavg)
  busy_end=$(busy_fraction)

  "$vpy" "$here/numpy_batched_summary.py" assemble --name "$name" --a "$a" --l "$l" --c "$c" \
    --runs "$work/runs.tsv" --reports "$work" --peer "$work/peer.json" --out "$out/$name.json" \
    --anchors "$f" --seed "$seed" --warmup "$warmup" --repetitions "$n" --started "$started" \
    --load-start "$load_start" --load-end "$load_end" \
    --busy-start "$busy_start" --busy-end "$busy_end" \
    --dcalign-command "$dcalign align --method odc --anchors $f --out G.npy --report R.json" \
    || failed=1
done

"$vpy" "$here/numpy_batched_summary.py" summarize "$out" --run "$out/run.json" --summary "$out/SUMMARY.md"
echo "run_odc_vs_numpy_batched: results in $out (SUMMARY.md)"
exit "$failed"
