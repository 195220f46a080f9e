#!/usr/bin/env bash
# ThreadSanitizer on code that runs on std::threads, each test built alone (it links nothing of
# dcalign) into ./build-tsan:
#  - the fused polar kernel's block code (src/base/polar_block.hpp), run by std::threads as one
#    block (tests/base/test_polar_block_threads.cpp): a conflicting access of two threads between
#    barriers, which on the GPU would be a shared-memory race, fails the run;
#  - the experiment's scheduler (src/experiment/scheduler.cpp): trials, their queued fits and
#    their ordered slots on four workers (tests/experiment/test_scheduler_threads.cpp).
# Part of scripts/test.sh (and so of CI); the GPU's own check is compute-sanitizer's racecheck
# in scripts/gpu-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g" -DCMAKE_C_FLAGS_RELEASE="-O1 -g" \
  -DDCALIGN_SANITIZE=thread -DDCALIGN_CUDA=OFF -DDCALIGN_BUILD_BENCH=OFF "$@" >/dev/null
cmake --build build-tsan --target test_polar_block_threads test_scheduler_threads
# halt_on_error: the first report ends the process non-zero; second_deadlock_stack for reports
# that involve the barrier's mutex.
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" build-tsan/tests/base/test_polar_block_threads
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
  build-tsan/tests/experiment/test_scheduler_threads
