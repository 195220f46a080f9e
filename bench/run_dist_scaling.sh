#!/usr/bin/env bash
# Weak and strong scaling of `dcalign::dist::align_distributed` on 1 and 2 MPI ranks:
# a = 1000, l = 50, float64 and float32, methods odc, gopp (10 iterations from the ODC start),
# imakura and kawakami (Gram route). One BLAS thread per rank, so that P ranks use P cores.
#   strong: c = 1000 users on 1 and on 2 ranks
#   weak:   500 users per rank (c = 500 on 1 rank, c = 1000 on 2 ranks)
# (Sizes bounded by the time of a shared 2-core machine, not by memory: c = 1000 double is
# 400 MB of anchors; USERS_PER_RANK raises them.)
# Needs a build with -DDCALIGN_BUILD_BENCH=ON and MPI (target dcalign_dist_scaling).
# Usage: bench/run_dist_scaling.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-bench/results/dist}
exe=$build/src/dist/dcalign_dist_scaling
mkdir -p "$out"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown) (working tree may differ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc --all) cores"
  echo "memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "mpi: $(mpirun --version | head -1)"
  echo "blas: $(dpkg -l 'libopenblas0*' 2>/dev/null | awk '/^ii/ {print $2, $3}' | head -1)"
  echo "compiler: $(c++ --version | head -1)"
  echo "command: $0 $*"
} >"$out/machine.txt"
results="$out/scaling.jsonl"
: >"$results"
per_rank=${USERS_PER_RANK:-500}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
for precision in float64 float32; do
  for method in odc gopp imakura kawakami; do
    for run in "1 $per_rank" "1 $((2 * per_rank))" "2 $((2 * per_rank))"; do
      set -- $run
      echo "== $method $precision: $1 rank(s), $2 users" >&2
      mpirun --oversubscribe -np "$1" "$exe" --users "$2" --a 1000 --l 50 --method "$method" \
        --precision "$precision" --repeat 2 --gopp-iterations 10 | tee -a "$results"
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
