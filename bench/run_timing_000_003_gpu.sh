#!/usr/bin/env bash
# The GPU columns of the timing figures of papers 000 (Fig. 3) and 003 (Figs. 4-6)
# items 5 and 7: the points of bench/run_timing_000_003.sh (and 003's c and l sweeps at
# a = 1000) timed by gpu_bench on the CUDA backend and by the PyTorch peer in the same run,
# float64 as the CPU runs, ODC / Imakura-DC / Kawakami-DC. For a GPU window, after
# scripts/gpu-check.sh has built gpu_bench (its build directory, default build-gpu):
#
#   bash scripts/gpu-check.sh "$OUT" --skip sanitizer,bench,peer --budget 120
#   LD_LIBRARY_PATH=/tmp/dcalign-deps/ldpath bench/run_timing_000_003_gpu.sh "$OUT/timing"
#
# Writes OUTDIR/{000_l,000_c,003_a,003_c,003_l}.{dcalign,peer}.json. Each series stops after
# SERIES_CAP seconds (default 4) and each sweep after SWEEP_CAP seconds (default 50), so the whole
# script ends within about 8 minutes even where a method is slow. Not yet run on a GPU.
#   DCALIGN_BUILD  build directory holding bench/gpu_bench (default: build-gpu)
#   REPETITIONS    timed runs per series (default 5, as the CPU run)
#   PYTHON         the interpreter with PyTorch (default python3); PEER=0 skips the peer
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: bench/run_timing_000_003_gpu.sh OUTDIR}
build=${DCALIGN_BUILD:-$here/../build-gpu}
bench=$build/bench/gpu_bench
py=${PYTHON:-python3}
reps=${REPETITIONS:-5}
series_cap=${SERIES_CAP:-4}
sweep_cap=${SWEEP_CAP:-50}
if [[ ! -x $bench ]]; then
  echo "run_timing_000_003_gpu: $bench not found (build it with scripts/gpu-check.sh)" >&2
  exit 2
fi
mkdir -p "$out"

# points NAME FIXED... : "a,l,c" for each value of the swept parameter
points() {
  local sweep=$1 a=$2 l=$3 c=$4 v list=""
  shift 4
  for v in "$@"; do
    case $sweep in
      a) list+="$v,$l,$c;" ;;
      l) list+="$a,$v,$c;" ;;
      c) list+="$a,$l,$v;" ;;
    esac
  done
  echo "${list%;}"
}

declare -A SWEEPS=(
  [000_l]=$(points l 3000 0 50 20 40 60 80 100)
  [000_c]=$(points c 3000 100 0 10 20 30 40 50 60 70 80 90 100)
  [003_a]=$(points a 0 50 50 1000 4000 7000 10000 13000 16000 19000 22000 25000 28000 31000 34000 37000 40000)
  [003_c]=$(points c 1000 50 0 50 100 150 200 250 300 350 400 450 500)
  [003_l]=$(points l 1000 0 50 50 100 150 200 250 300 350 400 450 500)
)
failed=0
for name in 000_l 000_c 003_a 003_c 003_l; do
  pts=${SWEEPS[$name]}
  echo "== $name: $pts"
  timeout -k 10 $((sweep_cap + 30)) "$bench" --points "$pts" --methods odc,imakura,kawakami \
    --precision float64 --repetitions "$reps" --warmup 1 --max-seconds-per-series "$series_cap" \
    --max-seconds-total "$sweep_cap" --json "$out/$name.dcalign.json" || failed=1
  if [[ ${PEER:-1} != 0 ]]; then
    timeout -k 10 $((sweep_cap + 30)) "$py" "$here/torch_peer.py" --device cuda --points "$pts" \
      --methods odc,imakura,kawakami --precision float64 --repetitions "$reps" --warmup 1 \
      --max-seconds-per-series "$series_cap" --max-seconds-total "$sweep_cap" \
      --json "$out/$name.peer.json" || failed=1
  fi
done
exit $failed
