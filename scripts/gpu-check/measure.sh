# shellcheck shell=bash
# gpu-check.sh, part 2 (sourced by scripts/gpu-check.sh, in its shell): ctest -L gpu,
# compute-sanitizer, gpu_bench, the PyTorch peer, the probe and training on the GPU.

# ---------------------------------------------------------------------------------------------
# 4. ctest -L gpu

run_tests() {
  if skipped tests; then
    record tests skipped "--skip tests"
    return
  fi
  if [[ $CONFIG_OK -ne 1 ]]; then
    record tests skipped "not configured"
    return
  fi
  local secs rc p f s ex=()
  secs=$(allot 60 130)
  [[ -n $CTEST_EXCLUDE ]] && ex=(-E "$CTEST_EXCLUDE")
  local cmd=(ctest --test-dir "$BUILD" -L gpu "${ex[@]}" --output-on-failure -j 4 --timeout "$secs")
  cmd_note "${cmd[*]}"
  {
    echo "=== ${cmd[*]} ($secs s at most)"
    [[ -n $UNBUILT_NOTE ]] && echo "=== left out (labelled gpu, program not built by this check): $UNBUILT_NOTE"
    [[ $GPU_OK -eq 1 ]] || echo "=== no usable GPU: $GPU_REASON (GPU tests are expected to skip)"
  } >"$CTEST_LOG"
  limited "$secs" "${cmd[@]}" >>"$CTEST_LOG" 2>&1
  rc=$?
  read -r p f s < <(awk '/^ *[0-9]+\/[0-9]+ Test +#[0-9]+:/ {
      if ($0 ~ /\*\*\*Skipped|Skipped *[0-9.]+ sec|Not Run \(Disabled\)/) s++
      else if ($0 ~ / Passed /) p++
      else f++ }
    END { printf "%d %d %d\n", p, f, s }' "$CTEST_LOG")
  TESTS_LINE="$p passed, $f failed, $s skipped${UNBUILT_NOTE:+; left out (not built): $UNBUILT_NOTE}"
  if grep -q 'No tests were found' "$CTEST_LOG" || ((p + f + s == 0)); then
    record tests FAIL "no test labelled gpu was found (ctest.log)"
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
    record tests FAIL "stopped at the time cap ($secs s): $TESTS_LINE so far"
  elif ((f > 0)) || [[ $rc -ne 0 ]]; then
    record tests FAIL "$TESTS_LINE (ctest.log)"
  elif [[ $GPU_OK -eq 1 ]] && ((p <= s)); then
    record tests FAIL "$TESTS_LINE: most GPU tests skipped although nvidia-smi sees a GPU (ctest.log)"
  elif [[ $GPU_OK -eq 1 ]] && ((s > 0)); then
    record tests ok "$TESTS_LINE; skipped: $(grep -E '\*\*\*Skipped' "$CTEST_LOG" | sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | head -10 | tr '\n' ' ')"
  else
    record tests ok "$TESTS_LINE"
  fi
}
run_tests

# ---------------------------------------------------------------------------------------------
# 5. compute-sanitizer, on the tests' small shapes (DCALIGN_GPU_TEST_SMALL=1): memcheck over
# every GPU test program, racecheck over the tests of the own kernels. The runs go side by side
# (the sanitizers' cost is mostly host-side instrumentation); each gets the whole time cap.

# Prints a gtest filter of the tests of BINARY whose full name matches the ERE (case-insensitive).
gtest_filter() {
  "$1" --gtest_list_tests 2>/dev/null | awk '/^[^ ]/ {suite = $1} /^  [^ ]/ {print suite $1}' |
    grep -Ei "$2" | tr '\n' ':' | sed 's/:$//'
}
SAN_JOBS=()  # "tool bin filter part"
plan_sanitizer() {  # plan_sanitizer TOOL ERE [FALLBACK_ERE]; an empty ERE: every test
  local tool=$1 re bin filter n=0
  for re in "$2" ${3:+"$3"}; do
    for bin in "${GPU_TEST_BINS[@]}"; do
      filter="*"
      [[ -n $re ]] && filter=$(gtest_filter "$bin" "$re")
      [[ -z $filter ]] && continue
      SAN_JOBS+=("$tool $bin $filter $BUILD/sanitizer.$tool.$(basename "$bin").part")
      n=$((n + 1))
    done
    ((n > 0)) && return 0
    echo "=== $tool: no test matches /$re/i" >>"$SAN_LOG"
  done
  return 1
}
run_sanitizers() {
  if skipped sanitizer; then
    record sanitizer skipped "--skip sanitizer"
    return
  fi
  if [[ $GPU_OK -ne 1 ]]; then
    record sanitizer skipped "no usable GPU: $GPU_REASON"
    return
  fi
  if [[ -z $SANITIZER ]]; then
    record sanitizer FAIL "compute-sanitizer not found"
    return
  fi
  if ((${#GPU_TEST_BINS[@]} == 0)); then
    record sanitizer FAIL "no GPU test program (ctest -L gpu lists none)"
    return
  fi
  local secs
  secs=$(allot "$SAN_SECONDS" 80)
  if ((secs < 30)); then
    record sanitizer skipped "too little time left ($(remaining) s)"
    return
  fi
  : >"$SAN_LOG"
  local verdicts=() status=0
  plan_sanitizer memcheck "$MEMCHECK_RE" || verdicts+=("memcheck: no test matches /$MEMCHECK_RE/i")
  plan_sanitizer racecheck "$RACECHECK_RE" "$RACECHECK_FALLBACK" ||
    verdicts+=("racecheck: no test matches /$RACECHECK_RE/i or /$RACECHECK_FALLBACK/i")
  # synccheck on the same tests: a barrier some threads of a block miss, or a warp shuffle
  # whose mask names lanes that do not take part (the fused kernel's pivot search shuffles).
  plan_sanitizer synccheck "$RACECHECK_RE" "$RACECHECK_FALLBACK" ||
    verdicts+=("synccheck: no test matches /$RACECHECK_RE/i or /$RACECHECK_FALLBACK/i")
  ((${#verdicts[@]})) && status=4
  local job tool bin filter part pids=() cmds=()
  for job in "${SAN_JOBS[@]}"; do
    read -r tool bin filter part <<<"$job"
    # API errors are the tests' own business (some provoke them: an 8 PB allocation, device
    # 4096); memcheck reports the memory accesses.
    local cmd=(env DCALIGN_GPU_TEST_SMALL=1 "$SANITIZER" --tool "$tool" --error-exitcode 99
      --print-limit 100)
    [[ $tool == memcheck ]] && cmd+=(--leak-check no --report-api-errors no)
    cmd+=("$bin" --gtest_brief=1)
    [[ $filter != "*" ]] && cmd+=("--gtest_filter=$filter")
    if [[ $filter == "*" ]]; then
      cmd_note "${cmd[*]}"
    else
      cmd_note "${cmd[*]:0:${#cmd[@]}-1} --gtest_filter=<the $(tr ':' '\n' <<<"$filter" | wc -l) tests of $(basename "$bin") matching the filter: sanitizer.log>"
    fi
    cmds+=("${cmd[*]}")
    limited "$secs" "${cmd[@]}" >"$part" 2>&1 &
    pids+=($!)
  done
  local i rc summary verdict
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    rc=$?
    read -r tool bin filter part <<<"${SAN_JOBS[$i]}"
    summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$part" | tail -1 | sed 's/^=* *//')
    if grep -qiE 'device not supported|not supported on this|unsupported device' "$part"; then
      verdict="unsupported (compute-sanitizer: device not supported)"
      ((status < 3)) && status=3
    elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
      verdict="incomplete: stopped at the time cap ($secs s); ${summary:-no summary}"
      ((status < 2)) && status=2
    elif [[ $rc -eq 99 ]]; then
      verdict="ERRORS: ${summary:-see sanitizer.log}"
      status=4
    elif [[ $rc -ne 0 ]]; then
      verdict="tests failed under the sanitizer (exit $rc); ${summary:-no summary}"
      status=4
    else
      verdict="clean: ${summary:-0 errors}"
    fi
    {
      echo "=== $tool ($secs s at most): ${cmds[$i]}"
      cat "$part"
      echo "=== $tool verdict: $verdict"
    } >>"$SAN_LOG"
    rm -f "$part"
    verdicts+=("$tool $(basename "$bin") ($([[ $filter == "*" ]] && echo "all tests" ||
      echo "$(tr ':' '\n' <<<"$filter" | wc -l) tests")): $verdict")
  done
  local text
  text=$(printf '%s / ' "${verdicts[@]}")
  case $status in
    0) record sanitizer ok "${text% / }" ;;
    2) record sanitizer incomplete "${text% / }" ;;
    3) record sanitizer unsupported "${text% / }" ;;
    *) record sanitizer FAIL "${text% / }" ;;
  esac
}
run_sanitizers
[[ -f $SAN_LOG ]] && truncate_log "$SAN_LOG"

# ---------------------------------------------------------------------------------------------
# 6. gpu_bench

run_bench() {
  if skipped bench; then
    record bench skipped "--skip bench"
    return
  fi
  if [[ -z $GPU_BENCH ]]; then
    record bench FAIL "gpu_bench was not built (build.log)"
    return
  fi
  local secs rc
  # Time kept for the steps after it: the peer's and the summary's, or with --skip peer only
  # the summary's 25 s.
  local reserve=25
  skipped peer || reserve=$([[ $FULL -eq 1 ]] && echo 110 || echo 45)
  secs=$(allot "$BENCH_SECONDS" $((reserve + WHEEL_RESERVE)))
  if ((secs < 30)); then
    record bench skipped "too little time left ($(remaining) s)"
    return
  fi
  # Short: ODC and the baseline that has a PyTorch peer too (Imakura-DC), float32, 5 pairs.
  # shellcheck disable=SC2054
  local cmd=("$GPU_BENCH" --points "$POINTS" --methods odc,imakura --precision float32
    --repetitions 5 --warmup 2 --max-seconds-per-series "$SERIES_CAP"
    --max-seconds-total $((secs - 10)) --json "$BENCH_JSON")
  # shellcheck disable=SC2054
  [[ $FULL -eq 1 ]] && cmd=("$GPU_BENCH" --points "$POINTS" --methods odc,imakura,kawakami,gopp
    --precision float32,float64 --repetitions 20 --warmup 3 --max-seconds-per-series "$SERIES_CAP"
    --max-seconds-total $((secs - 30)) --json "$BENCH_JSON")
  # shellcheck disable=SC2206
  [[ -n $BENCH_ARGS ]] && cmd+=($BENCH_ARGS)
  cmd_note "$(printf '%q ' "${cmd[@]}")"
  echo "=== $(printf '%q ' "${cmd[@]}") ($secs s at most)" >"$BENCH_OUT"
  limited "$secs" "${cmd[@]}" >>"$BENCH_OUT" 2>&1
  rc=$?
  local counts=""
  [[ -n $PYTHON ]] && counts=$(env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" "$PYTHON" \
    bench/gpu_report.py --counts --bench "$BENCH_JSON" 2>/dev/null | head -1)
  case $rc in
    0) record bench ok "$counts" ;;
    3) record bench FAIL "no usable GPU according to the library: $(grep -m1 'no usable GPU' "$BENCH_OUT")" ;;
    124 | 137) record bench incomplete "stopped at the time cap ($secs s); $counts" ;;
    *) record bench FAIL "exit $rc; $counts; $(grep -m1 -E 'error' "$BENCH_OUT" | cut -c1-200)" ;;
  esac
}
if [[ $GPU_OK -eq 1 ]]; then
  run_bench
elif [[ -n $GPU_BENCH ]] && ! skipped bench; then
  # What the program itself says without a GPU (and that it starts at all).
  cmd_note "$GPU_BENCH --points 8,2,2 --no-references --json $BENCH_JSON"
  "$GPU_BENCH" --points 8,2,2 --no-references --json "$BENCH_JSON" >"$BENCH_OUT" 2>&1
  record bench skipped "no usable GPU: $GPU_REASON; gpu_bench (exit $?): $(grep -m1 'no usable GPU' "$BENCH_OUT" | cut -c1-300)"
else
  record bench skipped "no usable GPU: $GPU_REASON"
fi

# ---------------------------------------------------------------------------------------------
# 7. The PyTorch peer (run with this machine's original library path: its own CUDA libraries)

run_peer() {
  if skipped peer; then
    record peer skipped "--skip peer"
    return
  fi
  if [[ -z $PYTHON ]]; then
    record peer FAIL "python3 not found"
    return
  fi
  local secs rc
  secs=$(allot "$PEER_SECONDS" $((25 + WHEEL_RESERVE)))
  if ((secs < 30)); then
    record peer skipped "too little time left ($(remaining) s)"
    return
  fi
  # The same methods, precision and repetitions as gpu_bench (the import of torch and the CUDA
  # context take 10-20 s of the time).
  # shellcheck disable=SC2054
  local cmd=("$PYTHON" bench/torch_peer.py --device cuda --points "$POINTS" --methods odc,imakura
    --precision float32 --repetitions 5 --warmup 2 --max-seconds-per-series "$SERIES_CAP"
    --max-seconds-total $((secs - 15)) --json "$PEER_JSON")
  # shellcheck disable=SC2054
  [[ $FULL -eq 1 ]] && cmd=("$PYTHON" bench/torch_peer.py --device cuda --points "$POINTS"
    --methods odc,imakura --precision float32,float64 --repetitions 20 --warmup 3
    --max-seconds-per-series "$SERIES_CAP" --max-seconds-total $((secs - 40)) --json "$PEER_JSON")
  # shellcheck disable=SC2206
  [[ -n $PEER_ARGS ]] && cmd+=($PEER_ARGS)
  cmd_note "PYTHONUNBUFFERED=1 $(printf '%q ' "${cmd[@]}")"
  echo "=== $(printf '%q ' "${cmd[@]}") ($secs s at most)" >"$PEER_OUT"
  env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" PATH="$ORIG_PATH" PYTHONUNBUFFERED=1 \
    timeout -k 10 "$secs" "${cmd[@]}" >>"$PEER_OUT" 2>&1
  rc=$?
  local counts
  counts=$(env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" "$PYTHON" bench/gpu_report.py --counts \
    --bench /nonexistent --peer "$PEER_JSON" 2>/dev/null | tail -1)
  case $rc in
    0) record peer ok "$counts" ;;
    3) record peer FAIL "$(tail -1 "$PEER_OUT")" ;;
    124 | 137) record peer incomplete "stopped at the time cap ($secs s); $counts" ;;
    *) record peer FAIL "exit $rc; $counts; $(tail -1 "$PEER_OUT" | cut -c1-200)" ;;
  esac
}
if [[ $GPU_OK -eq 1 ]]; then
  run_peer
elif [[ -n $PYTHON ]] && ! skipped peer; then
  cmd_note "$PYTHON bench/torch_peer.py --device cuda --points 8,2,2 --json $PEER_JSON"
  env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" timeout 120 "$PYTHON" bench/torch_peer.py --device cuda \
    --points 8,2,2 --json "$PEER_JSON" >"$PEER_OUT" 2>&1
  record peer skipped "no usable GPU: $GPU_REASON; torch_peer.py (exit $?): $(tail -1 "$PEER_OUT" | cut -c1-300)"
else
  record peer skipped "no usable GPU: $GPU_REASON"
fi

# ---------------------------------------------------------------------------------------------
# 7a. The probe (--probe): cuBLAS/cuSOLVER routes on their own, for the open GPU goals

# probe_bench WHAT ARGS...: gpu_bench with ARGS (and --no-references, a total cap) for at most
# 40 s, its console appended to the probe's.
probe_bench() {
  local what=$1 ab=$BUILD/bench/gpu_bench secs
  shift
  secs=$(allot 40 25)
  if [[ ! -x $ab ]] || ((secs < 20)); then
    echo "gpu-check: $what skipped ($(remaining) s left)" >>"$PROBE_OUT"
    return
  fi
  local cmd=("$ab" "$@" --no-references --max-seconds-total $((secs - 5)))
  cmd_note "$(printf '%q ' "${cmd[@]}")"
  echo "=== $(printf '%q ' "${cmd[@]}") ($secs s at most)" >>"$PROBE_OUT"
  limited "$secs" "${cmd[@]}" >>"$PROBE_OUT" 2>&1 || echo "gpu-check: $what exited $?" >>"$PROBE_OUT"
}
run_probe() {
  local bin=$BUILD/bench/gpu_probe secs rc
  if [[ ! -x $bin ]]; then
    record probe FAIL "gpu_probe was not built (build.log)"
    return
  fi
  secs=$(allot "$PROBE_SECONDS" 25)
  if ((secs < 20)); then
    record probe skipped "too little time left ($(remaining) s)"
    return
  fi
  local cmd=("$bin" --max-seconds-total $((secs - 10)) --json "$PROBE_JSON")
  cmd_note "$(printf '%q ' "${cmd[@]}")"
  echo "=== $(printf '%q ' "${cmd[@]}") ($secs s at most)" >"$PROBE_OUT"
  limited "$secs" "${cmd[@]}" >>"$PROBE_OUT" 2>&1
  rc=$?
  case $rc in
    0) record probe ok "$(grep -c '"case"' "$PROBE_OUT") cases (gpu_probe.json)" ;;
    3) record probe FAIL "$(grep -m1 'no usable GPU' "$PROBE_OUT" | cut -c1-300)" ;;
    124 | 137) record probe incomplete "stopped at the time cap ($secs s); gpu_probe.json has the cases so far" ;;
    *) record probe FAIL "exit $rc; cases with an error are marked in gpu_probe.json" ;;
  esac
  # The library with the per-matrix inverse route (BackendOptions::cuda_inverse_per_matrix_from)
  # on ODC at (1000, 950, 50), the point whose Newton steps the probe's inverse case times: its
  # table goes into the probe's console (summary.md), beside the main benchmark's same point.
  probe_bench "the per-matrix inverse run" --points "1000,950,50" --methods odc \
    --precision float64,float32 --repetitions 5 --warmup 1 --max-seconds-per-series 8 \
    --inverse-per-matrix-from 256 --json "$BUILD/gpu_bench_inverse.json"
  # Imakura-DC and Kawakami-DC with the randomized top-l SVD, as paper 001 timed them (its
  # Figure 6 used randomized SVD for both): i.i.d. anchors have no gap after sigma_l, so the
  # exact Gram route's eigensolver (syevdx, about 50 ms of the 61 at (20000, 50, 50)) is the
  # floor of the default, and this run shows the other configuration's times beside it.
  probe_bench "the randomized SVD run" --points "20000,50,50;1000,50,1000;1000,50,10000" \
    --methods imakura,kawakami --precision float32,float64 --svd randomized --repetitions 20 \
    --warmup 2 --max-seconds-per-series 2 --json "$BUILD/gpu_bench_randomized.json"
}
if [[ $PROBE -eq 1 && $GPU_OK -eq 1 ]]; then
  run_probe
elif [[ $PROBE -eq 1 ]]; then
  record probe skipped "no usable GPU: $GPU_REASON"
fi

# ---------------------------------------------------------------------------------------------
# 7b. Training on the GPU (--training): each command with --device cuda and then --device cpu,
# its output and wall time in training.log; the step fails when a command fails.

run_training() {
  [[ $TRAINING -eq 1 ]] || return
  if skipped training; then
    record training skipped "--skip training"
    return
  fi
  local ex=$BUILD/examples/train_aligned exp=$BUILD/src/cli/dcalign-experiment
  if [[ ! -x $ex || ! -x $exp ]]; then
    record training FAIL "train_aligned or dcalign-experiment was not built (build.log)"
    return
  fi
  if [[ $GPU_OK -ne 1 ]]; then
    record training skipped "no usable GPU: $GPU_REASON"
    return
  fi
  local secs deadline failed="" ran=0 work=$BUILD/training
  secs=$(allot 180 15)
  if ((secs < 30)); then
    record training skipped "too little time left ($(remaining) s)"
    return
  fi
  deadline=$((SECONDS + secs))
  rm -rf "$work" && mkdir -p "$work"
  one() {  # one NAME COMMAND...
    local name=$1 left=$((deadline - SECONDS)) t0=$SECONDS rc
    shift
    if ((left < 5)); then
      echo "=== $name: not run (the step's $secs s are used up)" >>"$TRAIN_LOG"
      failed+=" $name(time)"
      return
    fi
    cmd_note "$*"
    echo "=== $name: $*" >>"$TRAIN_LOG"
    limited "$left" "$@" >>"$TRAIN_LOG" 2>&1
    rc=$?
    echo "=== $name: exit $rc, $((SECONDS - t0)) s" >>"$TRAIN_LOG"
    ran=$((ran + 1))
    ((rc == 0)) || failed+=" $name(exit $rc)"
  }
  local dev
  for dev in cuda cpu; do
    one "train_aligned-$dev" "$ex" --device "$dev"
  done
  for dev in cuda cpu; do
    one "synthetic-$dev" "$exp" experiments/default_synthetic.toml --device "$dev" --trials 2 \
      --out "$work/$dev"
  done
  local data=${DCALIGN_DATA:-$ROOT/../shared/datasets}
  if [[ -f $data/mnist/train-images-idx3-ubyte || -f $data/mnist/train-images-idx3-ubyte.gz ]]; then
    for dev in cuda cpu; do
      one "mnist-table7-$dev" "$exp" experiments/mnist_table7.toml --data-dir "$data" \
        --device "$dev" --trials 2 --out "$work/$dev"
    done
  else
    echo "=== mnist-table7: not run (no MNIST under $data; set DCALIGN_DATA)" >>"$TRAIN_LOG"
  fi
  if [[ -n $failed ]]; then
    record training FAIL "$ran commands;$failed (training.log)"
  else
    record training ok "$ran commands (wall times and results in training.log)"
  fi
}
run_training
