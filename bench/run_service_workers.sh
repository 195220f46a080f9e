#!/usr/bin/env bash
# dcalign-server's job workers and its MPI path under bm_service_load (bench/README.md, "Service
# load"): the issue's load (50 collaborations x 10 participants, a linear h) with 1, 2 and 4 CPU
# workers, then an alignment-only load whose jobs run in the server's process and over MPI with
# 2 and 3 ranks. Writes JSON and Markdown tables into OUT (default bench/results/service).
#   bench/run_service_workers.sh [BUILD] [OUT]
# BUILD is a Release build with the analyst service, the learning layer and MPI (default: build);
# each run first waits for a quiet machine (1-minute load average below QUIET, default 1.5).
# Open MPI refuses to run as root without OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM), and containers often
# forbid its single-copy transfers: the script sets those two when it runs as root, for mpirun's
# sake only (they change no timing of the in-process runs).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-bench/results/service}
quiet=${QUIET:-1.5}
bench=$build/bench/service/bm_service_load
server=$build/src/cli/dcalign-server
[[ -x $bench && -x $server ]] || { echo "run_service_workers: build $bench and $server first" >&2; exit 2; }
mkdir -p "$out"
common=(--server-binary "$server" --quiet-load "$quiet" --quiet-wait 600)
for w in 1 2 4; do
  "$bench" "${common[@]}" --cpu-workers "$w" --model linear --e2e-repetitions 3 \
    --out "$out/workers_${w}_linear.json" --markdown "$out/workers_${w}_linear.md"
done
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none
for r in 0 2 3; do
  "$bench" "${common[@]}" --distributed-ranks "$r" --cpu-workers 2 --model none \
    --collaborations 20 --participants 12 --anchor-rows 5000 --e2e-repetitions 5 \
    --out "$out/mpi_ranks_${r}.json" --markdown "$out/mpi_ranks_${r}.md"
done
