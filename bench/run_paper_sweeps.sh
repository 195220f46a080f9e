#!/usr/bin/env bash
# The three sweeps of paper 001, Table 5 / Fig. 6, for ODC, Imakura-DC and Kawakami-DC in float64
# with the NumPy peer, then the fits, tables and the figure.
# Usage: bench/run_paper_sweeps.sh [extra dcalign_sweep options, e.g. --repetitions 100]
#   DCALIGN_BUILD  build directory holding bench/dcalign_sweep (default: build)
#   OUT            output directory (default: bench/results/cpu)
#   SWEEPS         which sweeps, in order (default: "c a l")
#   MAX_SECONDS    a series stops once its median at a point exceeds this (default: 60)
# Interrupted sweeps resume when the script is started again with the same options.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${DCALIGN_BUILD:-$here/../build}
out=${OUT:-$here/results/cpu}
sweep="$build/bench/dcalign_sweep"
for s in ${SWEEPS:-c a l}; do
  "$sweep" --sweep "$s" --methods odc,imakura,kawakami --precisions float64 --peers numpy \
    --warmup 1 --repetitions 5 --max-seconds "${MAX_SECONDS:-60}" \
    --quiet-below 0.15 --quiet-max-wait 300 "$@" \
    --out "$out/sweep_$s.json"
done
files=()
for s in l a c; do [[ -f "$out/sweep_$s.json" ]] && files+=("$out/sweep_$s.json"); done
/usr/bin/python3 "$here/analyze.py" "${files[@]}" --summary "$out/SUMMARY.md"
/usr/bin/python3 "$here/plot.py" "${files[@]}" --out "$out/fig6_cpu.png"
