#!/usr/bin/env bash
# Set-up, build and the whole test suite, in this order:
#  1. GoogleTest via CTest on the normal build (GPU cases skip without a GPU; under CI=true the
#     tests that read ../shared/datasets fail instead of skipping when the files are missing);
#  2. the GPU machine's configure rehearsed here with the system's development files hidden
#     (scripts/gpu-rehearse.sh: the bundle from Debian's mirrors, a mount namespace; root);
#  3. the Python tests of the benchmark and experiment tooling, and the Python bindings
#     (pip install . into a fresh virtual environment, then pytest; needs PyPI:
#     scripts/test-python.sh), then the documentation in that environment: the Sphinx site built
#     with warnings as errors, every code block of README.md and docs/ run, the built pages
#     checked in headless Chromium (scripts/test-docs.sh);
#  4. the same CTest suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#     (scripts/test-sanitizers.sh);
#  5. the fused polar kernel's block code on std::threads under ThreadSanitizer, the CPU's
#     check for the shared-memory races of that kernel (scripts/test-tsan.sh, under a minute);
#  6. every libFuzzer target on its committed corpus (scripts/fuzz.sh), with a fixed seed and a
#     fixed number of inputs (25000 per target, about 10 s each) so that the run is repeatable.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)"
bash scripts/gpu-rehearse.sh
for d in bench/tests experiments/tests; do
  [[ -d $d ]] && /usr/bin/python3 -m unittest discover -s "$d" -v
done
bash scripts/test-python.sh
bash scripts/test-python-client.sh
bash scripts/test-sanitizers.sh
bash scripts/test-tsan.sh
DCALIGN_FUZZ_SEED=1 DCALIGN_FUZZ_RUNS=25000 bash scripts/fuzz.sh 60
