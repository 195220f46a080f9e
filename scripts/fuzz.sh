#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan) into ./build-fuzz and runs
# each on its committed seed corpus for a bounded time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to 12 (the eight targets then take about a minute and a half after the
# build); TARGET defaults to all of fuzz_npy fuzz_idx fuzz_csv fuzz_toml fuzz_align fuzz_model
# fuzz_upload fuzz_outputs.
# The committed corpus tests/fuzz/corpus/<target>/ is only read: new inputs go to a scratch
# directory under build-fuzz/fuzz-runs/, findings to build-fuzz/fuzz-artifacts/ (a minimised
# copy of a crashing input is what belongs in the corpus as a regression seed, once fixed).
# Exits non-zero when any target reports a crash, a leak, undefined behaviour, an allocation
# above the limit (2 GB) or a timeout. Environment: DCALIGN_FUZZ_BUILD_JOBS (build jobs,
# default nproc), DCALIGN_FUZZ_FLAGS (extra libFuzzer flags, e.g. "-jobs=2 -workers=2"),
# DCALIGN_FUZZ_SEED and DCALIGN_FUZZ_RUNS: libFuzzer's seed and the number of inputs per target.
# With both set (as scripts/test.sh does) every run tries the same inputs, so the test command
# cannot turn red by chance; SECONDS_PER_TARGET is then only a cap. Without them (campaigns)
# libFuzzer draws its seed from the clock and runs for SECONDS_PER_TARGET.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-12}
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
shift || true
all_targets=(fuzz_npy fuzz_idx fuzz_csv fuzz_toml fuzz_align fuzz_model fuzz_upload fuzz_outputs)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2; }
done

bash scripts/install-deps.sh

build=build-fuzz
jobs=${DCALIGN_FUZZ_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
# Only what the targets need: no tests, benchmarks, learning layer, Python module or CUDA.
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDCALIGN_FUZZ=ON -DDCALIGN_BUILD_TESTS=OFF -DDCALIGN_BUILD_BENCH=OFF \
  -DDCALIGN_WITH_LEARN=OFF -DDCALIGN_BUILD_PYTHON=OFF -DDCALIGN_CUDA=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

# Longest input per target: enough for every seed and for the structure each format needs.
declare -A max_len=([fuzz_npy]=4096 [fuzz_idx]=4096 [fuzz_csv]=4096 [fuzz_toml]=4096
                    [fuzz_align]=1024 [fuzz_model]=8192 [fuzz_upload]=4096 [fuzz_outputs]=512)
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0:symbolize=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
# One thread per target: the inputs are tiny, and the runs stay reproducible.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

runs="$build/fuzz-runs" artifacts="$build/fuzz-artifacts"
repro=()
[[ -n ${DCALIGN_FUZZ_SEED:-} ]] && repro+=(-seed="$DCALIGN_FUZZ_SEED")
[[ -n ${DCALIGN_FUZZ_RUNS:-} ]] && repro+=(-runs="$DCALIGN_FUZZ_RUNS")
mkdir -p "$runs" "$artifacts"
failed=()
summary=()
start=$SECONDS
for t in "${targets[@]}"; do
  seeds="tests/fuzz/corpus/${t#fuzz_}"
  scratch="$runs/$t"
  rm -rf "$scratch"
  mkdir -p "$scratch"
  log="$runs/$t.log"
  dict=()
  [[ -f tests/fuzz/${t#fuzz_}.dict ]] && dict=(-dict="tests/fuzz/${t#fuzz_}.dict")
  echo "== $t: ${seconds}s on $seeds (log $log)"
  rc=0
  # The scratch directory comes first: libFuzzer writes new inputs only into the first one.
  # shellcheck disable=SC2086
  "$build/tests/fuzz/$t" "$scratch" "$seeds" "${dict[@]}" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -max_len="${max_len[$t]}" -print_final_stats=1 \
    -artifact_prefix="$artifacts/$t-" "${repro[@]}" ${DCALIGN_FUZZ_FLAGS:-} >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if ((rc != 0)); then
    failed+=("$t")
    echo "!! $t FAILED (exit $rc); the end of its log:"
    tail -n 40 "$log"
    summary+=("$t: FAILED after ${execs:-?} executions (artifacts: $artifacts/$t-*)")
  else
    summary+=("$t: ok, ${execs:-?} executions, coverage ${cov:-?} edges, $(ls "$scratch" | wc -l) new inputs")
  fi
done
echo "== fuzz summary (${seconds}s per target, $((SECONDS - start))s in all)"
printf '   %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz.sh: findings in ${failed[*]}" >&2
  exit 1
fi
