#!/usr/bin/env bash
# Set-up, build and the whole test suite: GoogleTest via CTest (GPU cases skip without a GPU)
# and the Python tests of the benchmark and experiment tooling.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)"
for d in bench/tests experiments/tests; do
  [[ -d $d ]] && /usr/bin/python3 -m unittest discover -s "$d" -v
done
