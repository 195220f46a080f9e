# shellcheck shell=bash
# gpu-check.sh, part 1 (sourced by scripts/gpu-check.sh, in its shell): the tools, the
# Debian packages unpacked into the prefix, the configure and the build of the GPU targets.

# ---------------------------------------------------------------------------------------------
# Tools and the GPU

find_tool() {  # find_tool NAME [candidate paths...]
  local name=$1
  shift
  if command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
    return 0
  fi
  for c in "$@"; do
    if [[ -x $c ]]; then
      echo "$c"
      return 0
    fi
  done
  return 1
}
NVCC=$(find_tool nvcc /usr/local/cuda/bin/nvcc /usr/local/cuda-13.0/bin/nvcc) || NVCC=""
if [[ -n $NVCC ]]; then
  PATH=$(dirname "$NVCC"):$PATH
  export PATH
fi
NVSMI=$(find_tool nvidia-smi /usr/local/nvidia/bin/nvidia-smi /usr/bin/nvidia-smi) || NVSMI=""
SANITIZER=$(find_tool compute-sanitizer /usr/local/cuda/bin/compute-sanitizer \
  /usr/local/cuda/compute-sanitizer/compute-sanitizer) || SANITIZER=""
PYTHON=$(find_tool python3) || PYTHON=""

GPU_OK=0
GPU_REASON=""
GPU_LINE=""
if [[ -z $NVSMI ]]; then
  GPU_REASON="nvidia-smi not found"
  ls /dev/nvidia0 >/dev/null 2>&1 || GPU_REASON+=" and no /dev/nvidia0 (no NVIDIA driver on this machine)"
elif ! GPU_LINE=$("$NVSMI" --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1); then
  GPU_REASON="nvidia-smi failed: $(echo "$GPU_LINE" | head -3 | tr '\n' ' ')"
  GPU_LINE=""
elif [[ -z $GPU_LINE ]]; then
  GPU_REASON="nvidia-smi lists no GPU"
else
  GPU_OK=1
fi
if [[ $GPU_OK -eq 0 ]]; then say "no usable GPU: $GPU_REASON (continuing with what does not need one)"; fi

COMMIT=$(git rev-parse HEAD 2>/dev/null || true)
COMMIT=${COMMIT:-${DCALIGN_GIT_COMMIT:-unknown (no .git in this copy; set DCALIGN_GIT_COMMIT)}}
DIRTY=$(git status --short 2>/dev/null | head -50 || true)
# A fingerprint of the sources, comparable with the same command on the machine the tree came from.
FINGERPRINT_CMD="find include src kernels tests bench scripts CMakeLists.txt -type f ! -path '*/__pycache__/*' ! -path 'bench/results/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16"
FINGERPRINT=$(bash -c "$FINGERPRINT_CMD" 2>/dev/null || echo unknown)

{
  echo "# gpu-check environment, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "command: scripts/gpu-check.sh $ARGS"
  echo "repository: $ROOT  commit: $COMMIT  source fingerprint: $FINGERPRINT"
  echo "  (fingerprint: $FINGERPRINT_CMD)"
  [[ -n $DIRTY ]] && echo "git status --short:" && echo "$DIRTY"
  echo "uname: $(uname -a)"
  grep -h PRETTY_NAME /etc/os-release 2>/dev/null
  echo "cores: $(nproc)  memory: $(free -g 2>/dev/null | awk '/Mem:/ {print $2 " GiB"}')"
  echo "user: $(id -un 2>/dev/null)"
  echo "PATH=$PATH"
  echo "LD_LIBRARY_PATH (at start)=$ORIG_LD_LIBRARY_PATH"
  echo "--- tools"
  echo "nvcc: ${NVCC:-not found}"; [[ -n $NVCC ]] && "$NVCC" --version | tail -2
  echo "cmake: $(command -v cmake) $(cmake --version 2>/dev/null | head -1)"
  echo "ninja: $(command -v ninja) $(ninja --version 2>/dev/null)"
  echo "c++: $(command -v c++) $(c++ --version 2>/dev/null | head -1)"
  echo "python3: ${PYTHON:-not found} $([[ -n $PYTHON ]] && "$PYTHON" --version 2>&1)"
  if [[ -n $PYTHON ]]; then
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
  fi
  echo "compute-sanitizer: ${SANITIZER:-not found} $([[ -n $SANITIZER ]] && "$SANITIZER" --version 2>&1 | tail -1)"
  echo "ncu: $(command -v ncu 2>/dev/null || echo not found)"
  echo "--- GPU"
  if [[ $GPU_OK -eq 1 ]]; then
    echo "$GPU_LINE"
    "$NVSMI" 2>&1 | head -30
  else
    echo "no usable GPU: $GPU_REASON"
  fi
} >>"$ENV_TXT" 2>&1

# ---------------------------------------------------------------------------------------------
# 1. Unpack the Debian packages into the prefix

L=$PREFIX/usr/lib/x86_64-linux-gnu
I=$PREFIX/usr/include
LDPATH=$PREFIX/ldpath
DEPS_OK=0
unpack() {
  local debs=(.debs/*.deb)
  if [[ ! -e ${debs[0]} ]]; then
    record unpack FAIL "no .debs/*.deb: run scripts/gpu-bundle.sh on a Debian 12 machine and carry .debs"
    return
  fi
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  local f bad=0
  for f in "${debs[@]}"; do
    if command -v dpkg >/dev/null 2>&1; then
      dpkg -x "$f" "$PREFIX" || bad=1
    else  # no dpkg: a .deb is an ar archive holding data.tar.xz
      ar p "$f" data.tar.xz | tar -xJ -C "$PREFIX" -f - || bad=1
    fi
  done
  # Absolute symlinks (e.g. libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) point into the
  # prefix instead.
  local link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    if [[ $target == /* && -e $PREFIX$target ]]; then ln -sfn "$PREFIX$target" "$link"; fi
  done < <(find "$PREFIX" -type l -print0)
  # What update-alternatives would have made: the OpenBLAS (pthreads) variant as libblas,
  # liblapack and libopenblas, and cblas.h.
  local ob=$L/openblas-pthread
  for n in libblas.so.3 liblapack.so.3 libblas.so liblapack.so libopenblas.so.0 libopenblas.so; do
    [[ -e $ob/$n ]] && ln -sfn "$ob/$n" "$L/$n"
  done
  for h in cblas.h f77blas.h openblas_config.h; do
    [[ -e $I/x86_64-linux-gnu/openblas-pthread/$h ]] &&
      ln -sfn "$I/x86_64-linux-gnu/openblas-pthread/$h" "$I/x86_64-linux-gnu/$h"
  done
  # OpenSSL's configuration headers live in the multiarch include directory, which the compiler
  # searches only under /usr: link them next to the other OpenSSL headers.
  if [[ -d $I/x86_64-linux-gnu/openssl ]]; then
    for h in "$I"/x86_64-linux-gnu/openssl/*.h; do
      [[ -e $I/openssl/$(basename "$h") ]] || ln -s "$h" "$I/openssl/$(basename "$h")"
    done
  fi
  # The run-time search path: the OpenBLAS/LAPACK stack always from the prefix (so that no
  # other BLAS of this machine is picked up), every other library only when this machine lacks
  # a library of that soname.
  mkdir -p "$LDPATH"
  local force='^(libopenblas\.so\.0|libblas\.so\.3|liblapack\.so\.3|liblapacke\.so\.3|libtmglib\.so\.3)$'
  local have
  have=$(ldconfig -p 2>/dev/null | awk '{print $1}' | sort -u)
  for f in "$L"/lib*.so.* "$PREFIX"/lib/x86_64-linux-gnu/lib*.so.*; do
    [[ -e $f ]] || continue
    local n
    n=$(basename "$f")
    [[ $n =~ ^lib[^/]*\.so\.[0-9a-z]+$ ]] || continue  # sonames only (libfoo.so.3, .so.1debian)
    if [[ $n =~ $force ]] || ! grep -qx "$n" <<<"$have"; then ln -sfn "$(readlink -f "$f")" "$LDPATH/$n"; fi
  done
  local dangling
  dangling=$(find "$PREFIX" -xtype l ! -path '*/share/doc/*' 2>/dev/null)
  {
    echo "--- unpacked ${#debs[@]} packages into $PREFIX"
    ls .debs/*.deb | sed 's/^/  /'
    echo "run-time path $LDPATH:"
    ls -l "$LDPATH" | sed 's/^/  /'
    [[ -n $dangling ]] && echo "dangling symlinks left:" && echo "$dangling" | sed 's/^/  /'
  } >>"$ENV_TXT"
  if [[ $bad -ne 0 ]]; then
    record unpack FAIL "some packages did not unpack (env.txt)"
  else
    DEPS_OK=1
    record unpack ok "${#debs[@]} packages into $PREFIX${dangling:+ (dangling symlinks: see env.txt)}"
  fi
}
if [[ $WHEEL_ONLY -eq 0 ]]; then
  cmd_note "for f in .debs/*.deb; do dpkg -x \$f $PREFIX; done  # + symlink repairs (scripts/gpu-check.sh)"
  unpack
  export LD_LIBRARY_PATH=$LDPATH${ORIG_LD_LIBRARY_PATH:+:$ORIG_LD_LIBRARY_PATH}
  echo "LD_LIBRARY_PATH (dcalign steps)=$LD_LIBRARY_PATH" >>"$ENV_TXT"
fi

# ---------------------------------------------------------------------------------------------
# 2. Configure

CONFIG_OK=0
CMAKE_ARGS=(
  -S "$ROOT" -B "$BUILD" -G Ninja --no-warn-unused-cli
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_CUDA_ARCHITECTURES=90
  "-DDCALIGN_CUDA=$CUDA"
  -DDCALIGN_BUILD_TESTS=ON
  -DDCALIGN_BUILD_BENCH=ON
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5
  -DCMAKE_PREFIX_PATH="$PREFIX/usr"
  -DBLAS_openblas_LIBRARY="$L/openblas-pthread/libopenblas.so"
  -DLAPACK_openblas_LIBRARY="$L/openblas-pthread/libopenblas.so"
  -DBLAS_LIBRARIES="$L/openblas-pthread/libopenblas.so"
  -DLAPACK_LIBRARIES="$L/openblas-pthread/libopenblas.so"
  -DLAPACKE_INCLUDE_DIR="$I"
  -DCBLAS_INCLUDE_DIR="$I/x86_64-linux-gnu/openblas-pthread"
  -DGTest_DIR="$L/cmake/GTest"
  -Dnlohmann_json_DIR="$PREFIX/usr/share/cmake/nlohmann_json"
  -DCLI11_DIR="$PREFIX/usr/share/cmake/CLI11"
  -DZLIB_INCLUDE_DIR="$I"
  -DZLIB_LIBRARY="$L/libz.so"
  -DZLIB_LIBRARY_RELEASE="$L/libz.so"
  -DOPENSSL_ROOT_DIR="$PREFIX/usr"
  -DOPENSSL_INCLUDE_DIR="$I"
  -DOPENSSL_CRYPTO_LIBRARY="$L/libcrypto.so"
  -DOPENSSL_SSL_LIBRARY="$L/libssl.so"
  -DLBFGS_LIBRARY="$L/liblbfgs.so"
  -DLBFGS_INCLUDE_DIR="$I"
  -DBoost_DIR="$(find "$L/cmake" -maxdepth 1 -name 'Boost-*' 2>/dev/null | head -1)"
  -DBoost_NO_SYSTEM_PATHS=ON
  # Nothing from this machine's CMake package registry (~/.cmake/packages).
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
)
# The optional dependencies that are not bundled (RDKit, MPI, Google Benchmark), off.
mapfile -t -O "${#CMAKE_ARGS[@]}" CMAKE_ARGS < <(bash scripts/deps.sh cmake-off)
[[ -n $NVCC ]] && CMAKE_ARGS+=(-DCMAKE_CUDA_COMPILER="$NVCC")
# Keys whose cached value must lie inside the prefix.
CHECK_KEYS=(BLAS_openblas_LIBRARY LAPACK_openblas_LIBRARY LAPACKE_INCLUDE_DIR
  CBLAS_INCLUDE_DIR GTest_DIR nlohmann_json_DIR CLI11_DIR ZLIB_INCLUDE_DIR ZLIB_LIBRARY
  OPENSSL_INCLUDE_DIR OPENSSL_CRYPTO_LIBRARY OPENSSL_SSL_LIBRARY LBFGS_LIBRARY LBFGS_INCLUDE_DIR
  Boost_DIR boost_headers_DIR)
if [[ $WITH_LEARN -eq 1 ]]; then
  TORCH_PREFIX=$(env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" "${PYTHON:-python3}" -c \
    'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
  CMAKE_ARGS+=(-DDCALIGN_WITH_LEARN=ON -DTorch_DIR="$TORCH_PREFIX/Torch"
    -Dtomlplusplus_DIR="$L/cmake/tomlplusplus" -DLIBSVM_INCLUDE_DIR="$I"
    -DLIBSVM_LIBRARY="$L/libsvm.so")
  CHECK_KEYS+=(tomlplusplus_DIR LIBSVM_INCLUDE_DIR LIBSVM_LIBRARY)
else
  CMAKE_ARGS+=(-DDCALIGN_WITH_LEARN=OFF)
fi

configure() {
  if [[ $DEPS_OK -ne 1 ]]; then
    record configure skipped "the dependencies were not unpacked"
    return
  fi
  if [[ $WITH_LEARN -eq 1 && ! -d ${TORCH_PREFIX:-/nonexistent}/Torch ]]; then
    record configure FAIL "--with-learn: no Torch CMake package (python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' gave '${TORCH_PREFIX:-nothing}')"
    return
  fi
  local secs
  secs=$(allot 120 180)
  [[ $CONFIGURE_ONLY -eq 1 ]] && secs=$(allot 600 0)
  # A fresh cache: values cached by an earlier configure (another prefix, the system's
  # packages) would otherwise be kept.
  rm -f "$BUILD/CMakeCache.txt"
  cmd_note "cmake ${CMAKE_ARGS[*]}"
  echo "=== configure: cmake ${CMAKE_ARGS[*]}" >>"$BUILD_LOG"
  if ! limited "$secs" cmake "${CMAKE_ARGS[@]}" >>"$BUILD_LOG" 2>&1; then
    record configure FAIL "cmake failed (build.log)"
    return
  fi
  # Every dependency must come from the prefix.
  local k v outside="" cache=$BUILD/CMakeCache.txt
  echo "--- CMakeCache.txt: the dependencies' paths (must lie in $PREFIX and exist)" >>"$ENV_TXT"
  for k in "${CHECK_KEYS[@]}"; do
    v=$(grep -E "^$k:[A-Z]+=" "$cache" | head -1 | cut -d= -f2-)
    if [[ $v == "$PREFIX"/* && -e $v ]]; then
      printf '  ok       %-24s %s\n' "$k" "$v" >>"$ENV_TXT"
    elif [[ $v == "$PREFIX"/* ]]; then
      # An explicit path given above, whose package is not in .debs (find_* takes a set
      # variable as found).
      printf '  MISSING  %-24s %s\n' "$k" "$v" >>"$ENV_TXT"
      outside+=" $k (missing)"
    else
      printf '  OUTSIDE  %-24s %s\n' "$k" "${v:-<not in the cache>}" >>"$ENV_TXT"
      outside+=" $k"
    fi
  done
  grep -E '^(CMAKE_CUDA_COMPILER|CMAKE_CXX_COMPILER|CMAKE_CUDA_ARCHITECTURES|DCALIGN_CUDA|Torch_DIR):' \
    "$cache" | sed 's/^/  /' >>"$ENV_TXT"
  grep -E 'dcalign: (CUDA backend|RDKit|MPI|Google Benchmark)' "$BUILD_LOG" | sed 's/^/  /' >>"$ENV_TXT"
  if [[ -n $outside ]]; then
    record configure FAIL "paths outside the prefix or missing:$outside (env.txt)"
  else
    CONFIG_OK=1
    record configure ok "$(grep -E 'dcalign: CUDA backend' "$BUILD_LOG" | tail -1 | sed 's/^-- //'), all dependency paths in the prefix"
  fi
}
[[ $WHEEL_ONLY -eq 1 ]] || configure

# ---------------------------------------------------------------------------------------------
# Summary (also written after --configure-only)

write_summary() {
  rm -f "$OUTDIR"/*.tmp  # left by a JSON writer stopped at its time cap
  FAILED=0
  PARTIAL=""
  local s c f
  for s in "${STEPS[@]}"; do
    [[ ${STATUS[$s]} == FAIL ]] && FAILED=1
    [[ ${STATUS[$s]} == incomplete || ${STATUS[$s]} == unsupported ]] && PARTIAL+=" $s (${STATUS[$s]})"
  done
  # Only the rehearsals (configure, the wheel with --wheel-cpu) may pass without a GPU.
  [[ $GPU_OK -eq 1 || $CONFIGURE_ONLY -eq 1 || $WHEEL_CPU -eq 1 ]] || FAILED=1
  {
    echo "# dcalign GPU check"
    echo
    if [[ $CONFIGURE_ONLY -eq 1 ]]; then
      echo "Verdict (--configure-only): **$([[ $FAILED -eq 0 ]] && echo PASSED || echo FAILED)** ($(elapsed) s)"
    elif [[ $WHEEL_CPU -eq 1 ]]; then
      echo "Verdict (--wheel-only --wheel-cpu, the rehearsal: torch_training.py on the CPU): **$([[ $FAILED -eq 0 ]] && echo PASSED || echo FAILED)** ($(elapsed) s)${GPU_REASON:+; no usable GPU: $GPU_REASON}"
    elif [[ $GPU_OK -eq 1 ]]; then
      echo "Verdict: **$([[ $FAILED -eq 0 ]] && echo PASSED || echo FAILED)**${PARTIAL:+, not complete:$PARTIAL} ($(elapsed) s, budget $BUDGET s)"
    else
      echo "Verdict: **FAILED: no usable GPU: $GPU_REASON** ($(elapsed) s). $([[ $WHEEL_ONLY -eq 1 ]] &&
        echo "The wheel's install, import and gpu tests" || echo "Unpack, configure, build and ctest")"
      echo "ran as far as they can without one."
    fi
    echo
    echo "| | |"
    echo "|---|---|"
    echo "| GPU (nvidia-smi name, driver, memory) | ${GPU_LINE:-none: $GPU_REASON} |"
    echo "| CUDA toolkit | $([[ -n $NVCC ]] && "$NVCC" --version | tail -2 | tr '\n' ' ' || echo 'nvcc not found') |"
    echo "| commit | $COMMIT (source fingerprint $FINGERPRINT) |"
    echo "| host | $(grep -h PRETTY_NAME /etc/os-release 2>/dev/null | cut -d= -f2 | tr -d '"'), $(nproc) cores, $(c++ --version 2>/dev/null | head -1), $(cmake --version 2>/dev/null | head -1) |"
    if [[ $WHEEL_ONLY -eq 0 ]]; then
      echo "| dependencies | .debs unpacked into $PREFIX; run-time path $LDPATH |"
      echo "| GPU tests (ctest -L gpu) | $TESTS_LINE |"
    fi
    [[ $WHEEL -eq 1 ]] && echo "| the wheel (--wheel: ${WHEEL_PY:-python3}, ${WHEEL_DIR#"$ROOT"/}) | $WHEEL_LINE |"
    echo
    echo "## Steps"
    echo
    echo "| step | status | details |"
    echo "|---|---|---|"
    for s in "${STEPS[@]}"; do
      echo "| $s | ${STATUS[$s]} | $(echo "${NOTE[$s]}" | tr '|' '/' | cut -c1-1500) |"
    done
    if [[ $CONFIGURE_ONLY -eq 0 && $WHEEL_ONLY -eq 0 ]]; then
      echo
      echo "## Benchmark ($([[ $FULL -eq 1 ]] && echo "--full" || echo "short: ODC and Imakura-DC, float32, 5 repetitions"))"
      echo
      if [[ -n $PYTHON ]]; then
        env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" "$PYTHON" bench/gpu_report.py --bench "$BENCH_JSON" \
          --peer "$PEER_JSON" 2>&1
      else
        echo "(no python3 for the table; see gpu_bench.json and torch_peer.json)"
      fi
    fi
    echo
    echo "## Commands"
    echo
    echo '```'
    echo "scripts/gpu-check.sh $ARGS   # in $ROOT, OUTDIR $OUTDIR"
    for c in "${COMMANDS[@]}"; do echo "$c"; done
    echo '```'
    for f in "$BENCH_OUT" "$PEER_OUT" "$PROBE_OUT"; do
      [[ -f $f ]] || continue
      echo
      echo "<details><summary>$(basename "$f" .console) console output (last 120 lines)</summary>"
      echo
      echo '```'
      tail -n 120 "$f"
      echo '```'
      echo "</details>"
    done
    echo
    if [[ $WHEEL_ONLY -eq 1 ]]; then
      echo "Files: summary.md, env.txt (versions), wheel.log."
    else
      echo "Files: summary.md, env.txt (versions, unpacked packages, CMake cache paths, ldd), build.log$(
        [[ $CONFIGURE_ONLY -eq 1 ]] || echo ", ctest.log, sanitizer.log, gpu_bench.json, torch_peer.json")$(
        [[ $TRAINING -eq 1 ]] && echo ", training.log")$([[ $PROBE -eq 1 ]] && echo ", gpu_probe.json")$(
        [[ $WHEEL -eq 1 ]] && echo ", wheel.log")."
    fi
  } >"$SUMMARY"
  say "summary: $SUMMARY"
  for s in "${STEPS[@]}"; do printf '  %-10s %-11s %s\n' "$s" "${STATUS[$s]}" "$(echo "${NOTE[$s]}" | cut -c1-160)"; done
}

TESTS_LINE="not run"
if [[ $CONFIGURE_ONLY -eq 1 ]]; then
  truncate_log "$BUILD_LOG"
  write_summary
  if [[ $FAILED -ne 0 ]]; then
    echo "gpu-check: --configure-only FAILED (details in $SUMMARY)"
    exit 1
  fi
  echo "gpu-check: --configure-only PASSED"
  exit 0
fi
# --wheel-only: the wheel step (gpu-check.sh) and the summary, nothing to build.
[[ $WHEEL_ONLY -eq 1 ]] && return 0

# ---------------------------------------------------------------------------------------------
# 3. Build: only what the GPU steps run

GPU_BENCH=""
build() {
  if [[ $CONFIG_OK -ne 1 ]]; then
    record build skipped "not configured"
    return
  fi
  local targets="" all secs rc t want=(dcalign test_cuda test_cuda_conformance gpu_bench) missing=""
  [[ $WITH_LEARN -eq 1 ]] && want+=(dcalign_learn dcalign_torch)
  [[ $TRAINING -eq 1 ]] && want+=(dcalign_experiment_cli train_aligned)
  [[ $PROBE -eq 1 ]] && want+=(gpu_probe)
  all=$(ninja -C "$BUILD" -t targets all 2>/dev/null | sed -n 's/^\([A-Za-z0-9_]*\): phony$/\1/p')
  for t in "${want[@]}"; do
    if grep -qx "$t" <<<"$all"; then targets+="$t "; else missing+=" $t"; fi
  done
  if [[ -n $missing ]]; then
    echo "gpu-check: no target$missing (without the CUDA backend there is no test_cuda, test_cuda_conformance or gpu_bench)" >>"$BUILD_LOG"
  fi
  secs=$(allot 150 130)
  cmd_note "cmake --build $BUILD -j $JOBS --target $targets"
  echo "=== build ($secs s at most): cmake --build $BUILD -j $JOBS --target $targets" >>"$BUILD_LOG"
  local t0=$SECONDS
  # shellcheck disable=SC2086
  limited "$secs" cmake --build "$BUILD" -j "$JOBS" --target $targets >>"$BUILD_LOG" 2>&1
  rc=$?
  [[ -x $BUILD/bench/gpu_bench ]] && GPU_BENCH=$BUILD/bench/gpu_bench
  if [[ $rc -eq 0 && ( $CUDA == OFF || -z $missing ) ]]; then
    record build ok "$((SECONDS - t0)) s; targets: $targets"
  elif [[ $rc -eq 0 ]]; then
    record build FAIL "no target$missing (build.log); built: $targets"
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
    record build FAIL "stopped at the time cap ($secs s); build.log"
  else
    record build FAIL "exit $rc; the first errors:$(grep -m3 -E 'error|Error' "$BUILD_LOG" | cut -c1-200 | sed 's/^/ /' | tr '\n' ';')"
  fi
  # Does every binary resolve its libraries (through the prefix where needed)?
  local bin missing_libs=""
  {
    echo "--- ldd (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
    for bin in "$BUILD"/tests/cuda/test_cuda "$BUILD"/tests/cuda/test_cuda_conformance "$GPU_BENCH"; do
      [[ -x $bin && -f $bin ]] || continue
      echo "$bin:"
      ldd "$bin" | grep -E 'openblas|lapack|blas|gfortran|quadmath|ssl|crypto|libz|lbfgs|svm|toml|cuda|cublas|cusolver|not found' | sed 's/^/  /'
      if ldd "$bin" | grep -q 'not found'; then missing_libs+=" $(basename "$bin")"; fi
    done
  } >>"$ENV_TXT" 2>&1
  if [[ -n $missing_libs ]]; then record libraries FAIL "unresolved libraries in:$missing_libs (env.txt)"; fi
}
build
truncate_log "$BUILD_LOG"

# The tests labelled gpu whose programs were built (gtest_discover_tests registers a program's
# tests once it is built; a plain add_test labelled gpu may name a program this check did not
# build: those are left out of ctest and named). Sets GPU_TEST_BINS and CTEST_EXCLUDE.
GPU_TEST_BINS=()
CTEST_EXCLUDE=""
UNBUILT_NOTE=""
list_gpu_tests() {
  [[ $CONFIG_OK -eq 1 ]] || return
  local out
  out=$(ctest --test-dir "$BUILD" -L gpu --show-only=json-v1 2>/dev/null |
    "${PYTHON:-python3}" -c 'import json, os, re, sys
bins, unbuilt = [], []
for t in json.load(sys.stdin).get("tests", []):
    c = (t.get("command") or [""])[0]
    if c and os.path.isfile(c) and os.access(c, os.X_OK):
        if c not in bins:
            bins.append(c)
    else:
        unbuilt.append(t["name"])
print("\n".join("bin " + b for b in bins))
if unbuilt:
    print("exclude ^(" + "|".join(re.escape(n) for n in unbuilt) + ")$")
    print("note " + " ".join(unbuilt))' 2>/dev/null)
  mapfile -t GPU_TEST_BINS < <(sed -n 's/^bin //p' <<<"$out")
  CTEST_EXCLUDE=$(sed -n 's/^exclude //p' <<<"$out")
  UNBUILT_NOTE=$(sed -n 's/^note //p' <<<"$out")
}
list_gpu_tests
