#!/usr/bin/env bash
# dcalign against the plain NumPy peer at the paper's comparison points, float64, the
# three methods, same thread count, measured point by point in one run of the driver:
#   (a, l, c) = (1000, 50, 50), (20000, 50, 50), (1000, 50, 1000), (1000, 950, 50).
# Usage: bench/run_methods_vs_numpy.sh [extra dcalign_sweep options]
#   DCALIGN_BUILD  build directory holding bench/dcalign_sweep (default: build)
#   OUT            output directory (default: bench/results/issue2)
# Interrupted runs resume when started again (the driver keeps finished points).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${DCALIGN_BUILD:-$here/../build}
out=${OUT:-$here/results/issue2}
sweep="$build/bench/dcalign_sweep"
common=(--methods odc,imakura,kawakami --precisions float64 --peers numpy --warmup 1
        --quiet-below 0.15 --quiet-max-wait 900 "$@")
"$sweep" --sweep a --values 1000,20000 --l 50 --c 50 --repetitions 20 "${common[@]}" \
  --out "$out/issue2_a.json"
"$sweep" --sweep c --values 1000 --a 1000 --l 50 --repetitions 20 "${common[@]}" \
  --out "$out/issue2_c.json"
"$sweep" --sweep l --values 950 --a 1000 --c 50 --repetitions 10 "${common[@]}" \
  --out "$out/issue2_l.json"
/usr/bin/python3 "$here/analyze.py" "$out"/issue2_{a,c,l}.json --summary "$out/SUMMARY.md"
