#!/usr/bin/env bash
# The timing figures of papers 000 (Fig. 3) and 003 (Figs. 4-6) on the CPU, with the NumPy peer,
# then the fits, tables and figures.
#   000 Fig. 3: m~ in {20, 40, ..., 100} at N = 50 users, and N in {10, 20, ..., 100} at m~ = 100
#     (000's default (m~, N) = (100, 50)); a = 3000 anchor rows, as experiments/dp_000 uses.
#   003 Fig. 6: a in {1000, 4000, ..., 40000} at (m~, c) = (50, 50). 003's Figs. 4 (c = 50..500)
#     and 5 (m~ = 50..500), both at a = 1000 and the other parameter 50, are the c and l sweeps of
#     results/cpu/ (bench/run_paper_sweeps.sh: c up to 1000, l up to 950 at the same defaults);
#     the 003 figure draws them beside the new a sweep.
# Usage: bench/run_timing_000_003.sh [extra dcalign_sweep options]
#   DCALIGN_BUILD  build directory holding bench/dcalign_sweep (default: build)
#   OUT            output directory (default: bench/results/cpu)
#   REPETITIONS    timed runs per series and point (default: 5; the papers use 10 and 100)
# Interrupted sweeps resume when the script is started again with the same options.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${DCALIGN_BUILD:-$here/../build}
out=${OUT:-$here/results/cpu}
sweep="$build/bench/dcalign_sweep"
mkdir -p "$out/000" "$out/003"
common=(--methods odc,imakura,kawakami --precisions float64 --peers numpy --warmup 1
        --repetitions "${REPETITIONS:-5}" --max-seconds 60 --quiet-below 0.15 --quiet-max-wait 300)
"$sweep" --sweep l --values 20:20:100 --a 3000 --c 50 "${common[@]}" "$@" \
  --out "$out/000/sweep_l.json"
"$sweep" --sweep c --values 10:10:100 --a 3000 --l 100 "${common[@]}" "$@" \
  --out "$out/000/sweep_c.json"
"$sweep" --sweep a --values 1000:3000:40000 --l 50 --c 50 "${common[@]}" "$@" \
  --out "$out/003/sweep_a.json"
py=/usr/bin/python3
$py "$here/analyze.py" "$out/000/sweep_l.json" "$out/000/sweep_c.json" --summary "$out/000/SUMMARY.md"
$py "$here/plot.py" "$out/000/sweep_l.json" "$out/000/sweep_c.json" --out "$out/000/fig3_000_cpu.png"
$py "$here/analyze.py" "$out/003/sweep_a.json" --summary "$out/003/SUMMARY.md"
$py "$here/plot.py" "$out/sweep_c.json" "$out/sweep_l.json" "$out/003/sweep_a.json" \
  --out "$out/003/fig4-6_003_cpu.png"
