#!/usr/bin/env bash
# dcalign ODC (float64) against the lab-style NumPy loop (per-user numpy.linalg.svd) at
# the paper's comparison points, in the same run of the driver, and, when a second build is
# given, the same driver built from an earlier commit right after it (same machine, same BLAS):
#   (a, l, c) = (1000, 50, 50), (20000, 50, 50), (1000, 50, 1000), (1000, 950, 50).
# Usage: bench/run_odc_vs_numpy_loop.sh [extra dcalign_sweep options]
#   DCALIGN_BUILD      build directory holding bench/dcalign_sweep (default: build)
#   DCALIGN_BASELINE   optional build directory of an earlier commit's dcalign_sweep
#   OUT                output directory (default: bench/results/issue9)
#   L_REPS             timed runs at the l = 950 point (default 10)
#
# Nothing is set in the environment: where OpenBLAS 0.3.21 falls back to its generic kernels on
# a CPU newer than itself, dcalign loads the CPU's set itself (docs/explanation/numerics.md); the NumPy
# peer runs on whatever its own OpenBLAS chooses, as a NumPy user's does. The JSON records the
# BLAS configuration each side reported.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${DCALIGN_BUILD:-$here/../build}
out=${OUT:-$here/results/issue9}
mkdir -p "$out"
run() {  # run SWEEP_BINARY PEERS TAG [extra options]
  local sweep=$1 peers=$2 tag=$3
  shift 3
  local common=(--methods odc --precisions float64 --peers "$peers" --warmup 2 --quiet-below 0
                "$@")
  "$sweep" --sweep a --values 1000,20000 --l 50 --c 50 --repetitions 20 "${common[@]}" \
    --out "$out/${tag}_a.json"
  "$sweep" --sweep c --values 1000 --a 1000 --l 50 --repetitions 20 "${common[@]}" \
    --out "$out/${tag}_c.json"
  "$sweep" --sweep l --values 950 --a 1000 --c 50 --repetitions "${L_REPS:-10}" "${common[@]}" \
    --out "$out/${tag}_l.json"
}

run "$build/bench/dcalign_sweep" numpy issue9 "$@"
if [[ -n ${DCALIGN_BASELINE:-} ]]; then
  run "$DCALIGN_BASELINE/bench/dcalign_sweep" none baseline "$@"
fi
/usr/bin/python3 "$here/analyze.py" "$out"/issue9_{a,c,l}.json --summary "$out/SUMMARY.md"
