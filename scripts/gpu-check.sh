#!/usr/bin/env bash
# Builds dcalign with the CUDA backend on a GPU machine that has no package registry, runs the
# GPU tests, compute-sanitizer, a short GPU benchmark and the PyTorch peer, and writes a Markdown
# summary, within 300 s on an H100/H200 (16 cores). Run it from the repository root, after
# scripts/gpu-bundle.sh filled .debs/ on a Debian 12 machine and .debs/ was carried along with
# the working tree.
#
# Usage: scripts/gpu-check.sh [OUTDIR] [options]
#   OUTDIR                 default: $OUT if set, else ./gpu-check-out. Receives at most 8 files:
#                          summary.md, build.log, ctest.log, sanitizer.log, gpu_bench.json,
#                          torch_peer.json, env.txt, and training.log (--training) or
#                          gpu_probe.json (--probe) or wheel.log (--wheel); with --wheel-only
#                          summary.md, env.txt, wheel.log
#   --full                 the long benchmark (4 methods, float32 and float64, 20
#                          repetitions) instead of the short one, for a 10-minute window
#                          (budget 560 s)
#   --configure-only       stop after unpack and configure; the exit status is theirs (no GPU
#                          needed: scripts/gpu-rehearse.sh runs this with the system's
#                          development files hidden)
#   --with-learn           also build the learning layer (LibTorch from this machine's PyTorch,
#                          LIBSVM, toml++ and XGBoost from .debs)
#   --training             with --with-learn, training on the GPU: the C++ example
#                          train_aligned and the synthetic default experiment, each with
#                          --device cuda and --device cpu, and Table 7's MNIST layout for 2
#                          trials both ways where $DCALIGN_DATA holds MNIST (training.log)
#   --probe                also build and run bench/gpu_probe (the cuBLAS/cuSOLVER routes of
#                          the open GPU goals' routes timed on their own) into gpu_probe.json, and
#                          gpu_bench's ODC at (1000, 950, 50) with --inverse-per-matrix-from 256
#                          and Imakura-DC, Kawakami-DC with --svd randomized at the small-l
#                          points (their tables in the probe's console in summary.md), after
#                          the peer, for at most --probe-seconds (default 60); not with
#                          --training (the window returns at most 8 files)
#   --wheel                also the Python wheel on this machine's PyTorch, after the peer
#                          (scripts/gpu-check/wheel.sh): the carried wheel of python3's tag
#                          (cpXY; .gpu-wheel/, from scripts/gpu-bundle.sh --wheel PY) installed
#                          --no-deps into a fresh venv that sees python3's PyTorch, a smoke
#                          check, `pytest -m gpu python/tests` and examples/python/
#                          torch_training.py --device cuda, into wheel.log, for at most
#                          --wheel-seconds (default 120; the benchmark and the peer leave it 60 s
#                          of the budget); not with --probe or --training (8 files)
#   --wheel-only           only that step (no unpack, configure or build; about 30 s): the files
#                          summary.md, env.txt, wheel.log
#   --wheel-cpu            the rehearsal of the wheel step where there is no GPU
#                          (scripts/gpu-rehearse.sh --wheel-only): torch_training.py with
#                          --device cpu, and the verdict may pass without a GPU
#   --wheel-dir DIR        where the wheels are (default .gpu-wheel)
#   --python PY            the interpreter of the wheel step (default python3 on PATH)
#   --no-cuda              configure with -DDCALIGN_CUDA=OFF (to test the plumbing on a machine
#                          whose CUDA backend does not compile)
#   --budget SECONDS       wall-clock budget of the whole script (default 290, 560 with --full);
#                          later steps get what is left, the summary is always written
#   --series-cap SECONDS   --max-seconds-per-series of the benchmark and the peer (default 4,
#                          5 with --full)
#   --jobs N               build jobs (default: all cores)
#   --build-dir DIR        default build-gpu
#   --prefix DIR           where the .debs are unpacked (default /tmp/dcalign-deps; wiped)
#   --bench-args "..."     extra arguments for gpu_bench (after the defaults, so they win)
#   --peer-args "..."      extra arguments for bench/torch_peer.py
#   --skip STEPS           comma-separated steps not to run: tests, sanitizer, bench, peer,
#                          wheel
#   --sanitizer-seconds N, --bench-seconds N, --peer-seconds N, --probe-seconds N,
#   --wheel-seconds N
#                          the most each of these steps may take (defaults 90, 50, 50; with
#                          --full 90, 200, 150; each also gets no more than what the budget
#                          leaves after reserving time for the steps after it)
#   --memcheck-filter ERE, --racecheck-filter ERE
#                          which GPU tests (full gtest names, case-insensitive) each sanitizer
#                          runs; defaults: memcheck every test, racecheck RACECHECK_RE below
#
# Steps: (1) unpack .debs/*.deb with dpkg -x into the prefix and repair what dpkg -x leaves
# (alternatives symlinks such as libblas.so.3/liblapack.so.3 -> openblas-pthread, absolute
# symlinks, multiarch OpenSSL headers); (2) configure with explicit paths into the prefix for
# every dependency, the optional ones that are not bundled turned off (scripts/deps.sh
# cmake-off), and check CMakeCache.txt that the paths lie in the prefix; (3) build only the
# library, test_cuda, test_cuda_conformance and gpu_bench; (4) ctest -L gpu; (5) with
# DCALIGN_GPU_TEST_SMALL=1 (the tests' small shapes), compute-sanitizer memcheck over every GPU
# test program, racecheck and synccheck over the tests of dcalign's own kernels, side by side;
# (6) gpu_bench; (7) the PyTorch peer; (7a) the probe, (7b) training, (7c) the wheel, each when
# asked for; (8) summary.md. A step that fails does not stop the
# independent steps after it. Exit status 0 only when every step passed and a GPU was used
# (--configure-only and --wheel-cpu need none); with no usable GPU the script says "no usable
# GPU: <reason>", does what it can (unpack, configure, build, ctest, whose GPU tests then skip;
# the wheel's install, import and gpu tests, which skip) and exits 1.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
START=$(date +%s)
ARGS="$*"

OUTDIR=""
WITH_LEARN=0
TRAINING=0
PROBE=0
PROBE_SECONDS=60
WHEEL=0
WHEEL_ONLY=0
WHEEL_CPU=0
WHEEL_DIR=""
WHEEL_PY=""
WHEEL_SECONDS=120
CUDA=ON
FULL=0
CONFIGURE_ONLY=0
BUDGET=""
SERIES_CAP=""
JOBS=$(nproc 2>/dev/null || echo 4)
BUILD=build-gpu
PREFIX=/tmp/dcalign-deps
BENCH_ARGS=""
PEER_ARGS=""
SKIP=","
SAN_SECONDS=90
BENCH_SECONDS=""
PEER_SECONDS=""
# memcheck: every test of every GPU test program (an empty filter); racecheck: the tests of
# dcalign's own kernels with shared memory (polar start / Newton step, the fused Newton phase
# and its polish, finiteness scans, reductions), both precisions, and synccheck on the same
# tests. When the racecheck default matches no test (renamed tests), the fallback after it is
# used.
MEMCHECK_RE=""
RACECHECK_RE='^CudaVsCpu/[0-9]+\.(PolarIteration|PolarNewtonPhase|PolarNewtonPolish|PolarBatched|NonFinite|Orthogonality|InnerProducts)|^CudaLarge\.'
RACECHECK_FALLBACK='polar|newton|reduc|sum_?squares|finite|orthogonal|norm'
while (($#)); do
  case $1 in
    --full) FULL=1 ;;
    --configure-only) CONFIGURE_ONLY=1 ;;
    --with-learn) WITH_LEARN=1 ;;
    --training) TRAINING=1 WITH_LEARN=1 ;;
    --probe) PROBE=1 ;;
    --probe-seconds) PROBE_SECONDS=$2; shift ;;
    --wheel) WHEEL=1 ;;
    --wheel-only) WHEEL=1 WHEEL_ONLY=1 ;;
    --wheel-cpu) WHEEL_CPU=1 ;;
    --wheel-dir) WHEEL_DIR=$2; shift ;;
    --wheel-seconds) WHEEL_SECONDS=$2; shift ;;
    --python) WHEEL_PY=$2; shift ;;
    --no-cuda) CUDA=OFF ;;
    --budget) BUDGET=$2; shift ;;
    --series-cap) SERIES_CAP=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --build-dir) BUILD=$2; shift ;;
    --prefix) PREFIX=$2; shift ;;
    --bench-args) BENCH_ARGS=$2; shift ;;
    --peer-args) PEER_ARGS=$2; shift ;;
    --skip) SKIP=",$2,"; shift ;;
    --sanitizer-seconds) SAN_SECONDS=$2; shift ;;
    --bench-seconds) BENCH_SECONDS=$2; shift ;;
    --peer-seconds) PEER_SECONDS=$2; shift ;;
    --memcheck-filter) MEMCHECK_RE=$2; shift ;;
    --racecheck-filter) RACECHECK_RE=$2; RACECHECK_FALLBACK=$2; shift ;;
    -h | --help)
      sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "gpu-check: unknown option $1" >&2
      exit 2
      ;;
    *) OUTDIR=$1 ;;
  esac
  shift
done
if [[ $PROBE -eq 1 && $TRAINING -eq 1 ]]; then
  echo "gpu-check: --probe and --training together would write 9 files; a GPU window returns 8: run them in two calls" >&2
  exit 2
fi
if [[ $WHEEL -eq 1 && $WHEEL_ONLY -eq 0 && $((PROBE + TRAINING)) -gt 0 ]]; then
  echo "gpu-check: --wheel with --probe or --training would write 9 files; a GPU window returns 8: run --wheel-only in another call" >&2
  exit 2
fi
if [[ $WHEEL_CPU -eq 1 && $WHEEL_ONLY -eq 0 ]]; then
  echo "gpu-check: --wheel-cpu is the rehearsal of --wheel-only" >&2
  exit 2
fi
WHEEL_DIR=${WHEEL_DIR:-$ROOT/.gpu-wheel}
# Seconds the benchmark and the peer leave for the wheel step after them (--wheel).
WHEEL_RESERVE=$((WHEEL == 1 && WHEEL_ONLY == 0 ? 60 : 0))
[[ -d $WHEEL_DIR ]] && WHEEL_DIR=$(cd "$WHEEL_DIR" && pwd)
if [[ $FULL -eq 1 ]]; then
  BUDGET=${BUDGET:-560} SERIES_CAP=${SERIES_CAP:-5}
  BENCH_SECONDS=${BENCH_SECONDS:-200} PEER_SECONDS=${PEER_SECONDS:-150}
else
  BUDGET=${BUDGET:-290} SERIES_CAP=${SERIES_CAP:-4}
  BENCH_SECONDS=${BENCH_SECONDS:-50} PEER_SECONDS=${PEER_SECONDS:-50}
fi
OUTDIR=${OUTDIR:-${OUT:-$ROOT/gpu-check-out}}
mkdir -p "$OUTDIR" "$BUILD"
OUTDIR=$(cd "$OUTDIR" && pwd)
BUILD=$(cd "$BUILD" && pwd)
SUMMARY=$OUTDIR/summary.md
BUILD_LOG=$OUTDIR/build.log
CTEST_LOG=$OUTDIR/ctest.log
SAN_LOG=$OUTDIR/sanitizer.log
BENCH_JSON=$OUTDIR/gpu_bench.json
PEER_JSON=$OUTDIR/torch_peer.json
ENV_TXT=$OUTDIR/env.txt
TRAIN_LOG=$OUTDIR/training.log
PROBE_JSON=$OUTDIR/gpu_probe.json
WHEEL_LOG=$OUTDIR/wheel.log
WHEEL_LINE="not run"
PROBE_OUT=$BUILD/gpu_probe.console
BENCH_OUT=$BUILD/gpu_bench.console
PEER_OUT=$BUILD/torch_peer.console
rm -f "$SUMMARY" "$BUILD_LOG" "$CTEST_LOG" "$SAN_LOG" "$BENCH_JSON" "$PEER_JSON" "$ENV_TXT" \
  "$TRAIN_LOG" "$BENCH_OUT" "$PEER_OUT" "$PROBE_JSON" "$PROBE_OUT" "$WHEEL_LOG"
[[ $WHEEL_ONLY -eq 1 ]] || : >"$BUILD_LOG"
: >"$ENV_TXT"

ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
ORIG_PATH=$PATH
# The benchmark and test points: the l = 950 point last, since its slow series (GOPP, SVDs of
# 950 x 950 matrices) could otherwise use up the time of the (1000, 50, 10000) point.
POINTS="20000,50,50;1000,50,1000;1000,50,10000;1000,950,50"

# ---------------------------------------------------------------------------------------------
# Bookkeeping

elapsed() { echo $(($(date +%s) - START)); }
remaining() { echo $((BUDGET - $(elapsed))); }
# seconds for a step: min(want, remaining - reserve), or 0 when too little is left
allot() {
  local want=$1 reserve=$2 r
  r=$(($(remaining) - reserve))
  ((r > want)) && r=$want
  ((r < 0)) && r=0
  echo "$r"
}
say() { echo "[gpu-check $(printf '%4d' "$(elapsed)")s] $*"; }
STEPS=()
declare -A STATUS=() NOTE=()
record() {  # record STEP STATUS NOTE; STATUS: ok, FAIL, skipped, incomplete, unsupported
  STEPS+=("$1")
  STATUS[$1]=$2
  NOTE[$1]=$3
  say "$1: $2${3:+ - $3}"
}
COMMANDS=()
cmd_note() { COMMANDS+=("$*"); }
skipped() { [[ $SKIP == *",$1,"* ]]; }
# Runs a command with a time limit: timeout with a grace kill; prints the exit status.
limited() {
  local secs=$1
  shift
  timeout -k 10 "$secs" "$@"
}
truncate_log() {  # keep the last 2 MB
  local f=$1
  if [[ -f $f ]] && (($(stat -c %s "$f") > 2000000)); then
    tail -c 2000000 "$f" >"$f.tmp" && mv "$f.tmp" "$f"
    sed -i '1s/^/[... truncated to the last 2 MB ...]\n/' "$f"
  fi
}

# The steps, in order, from files beside this one (each under 600 lines): set-up (tools,
# packages, configure, build), the measurements (tests, sanitizers, benchmarks, the peer, the
# probe, training) and the wheel. They run in this shell, with its variables and functions.
# With --wheel-only, setup.sh does only the tools, the GPU and env.txt.
source "$ROOT/scripts/gpu-check/setup.sh"
[[ $WHEEL_ONLY -eq 1 ]] || source "$ROOT/scripts/gpu-check/measure.sh"
if [[ $WHEEL -eq 1 ]]; then
  source "$ROOT/scripts/gpu-check/wheel.sh"
  run_wheel
fi

# ---------------------------------------------------------------------------------------------
# 8. Summary

write_summary
if [[ $GPU_OK -ne 1 ]]; then
  echo "gpu-check: no usable GPU: $GPU_REASON"
fi
if [[ $FAILED -ne 0 ]]; then
  echo "gpu-check: FAILED (details in $SUMMARY)"
  exit 1
fi
echo "gpu-check: PASSED"
exit 0
