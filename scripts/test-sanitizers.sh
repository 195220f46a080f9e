#!/usr/bin/env bash
# The whole CTest suite under AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer
# included with ASan on Linux), built into ./build-sanitize with gcc at -O1. Any finding aborts
# the test that made it, so CTest fails. Part of scripts/test.sh (and so of CI).
#
# Left out: package_consumer (it installs the build and links a separate project against it,
# which would need the sanitizer runtime in that project's flags too; the normal build runs it)
# and the CUDA backend (no GPU here; the normal build compiles it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" -DCMAKE_C_FLAGS_RELEASE="-O1 -g1" \
  -DDCALIGN_SANITIZE=address,undefined -DDCALIGN_CUDA=OFF -DDCALIGN_BUILD_BENCH=OFF "$@"
cmake --build build-sanitize -j "$jobs"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir build-sanitize --output-on-failure -j "$jobs" -E '^package_consumer$'
