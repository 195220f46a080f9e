#!/usr/bin/env bash
# Set-up, build and the whole test suite: GoogleTest via CTest (GPU cases skip without a GPU)
# the Python tests of the benchmark and experiment tooling, and the Python bindings (pip install .
# into a fresh virtual environment, then pytest; needs PyPI: scripts/test-python.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)"
for d in bench/tests experiments/tests; do
  [[ -d $d ]] && /usr/bin/python3 -m unittest discover -s "$d" -v
done
bash scripts/test-python.sh
