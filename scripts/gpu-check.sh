#!/usr/bin/env bash
# Builds dcalign with the CUDA backend on a GPU machine that has no package registry, runs the
# GPU tests, compute-sanitizer, a short GPU benchmark and the PyTorch peer, and writes a Markdown
# summary, within 300 s on an H100/H200 (16 cores). Run it from the repository root, after
# scripts/gpu-bundle.sh filled .debs/ on a Debian 12 machine and .debs/ was carried along with
# the working tree.
#
# Usage: scripts/gpu-check.sh [OUTDIR] [options]
#   OUTDIR                 default: $OUT if set, else ./gpu-check-out. Receives at most 8 files:
#                          summary.md, build.log, ctest.log, sanitizer.log, gpu_bench.json,
#                          torch_peer.json, env.txt, and training.log (--training) or
#                          gpu_probe.json (--probe)
#   --full                 the long benchmark (4 methods, float32 and float64, 20
#                          repetitions) instead of the short one, for a 10-minute window
#                          (budget 560 s)
#   --configure-only       stop after unpack and configure; the exit status is theirs (no GPU
#                          needed: scripts/gpu-rehearse.sh runs this with the system's
#                          development files hidden)
#   --with-learn           also build the learning layer (LibTorch from this machine's PyTorch,
#                          LIBSVM and toml++ from .debs; XGBoost must be on this machine)
#   --training             with --with-learn, training on the GPU: the C++ example
#                          train_aligned and the synthetic default experiment, each with
#                          --device cuda and --device cpu, and Table 7's MNIST layout for 2
#                          trials both ways where $DCALIGN_DATA holds MNIST (training.log)
#   --probe                also build and run bench/gpu_probe (the cuBLAS/cuSOLVER routes of
#                          the open GPU goals' routes timed on their own) into gpu_probe.json, and
#                          gpu_bench's ODC at (1000, 950, 50) with --inverse-per-matrix-from 256
#                          and Imakura-DC, Kawakami-DC with --svd randomized at the small-l
#                          points (their tables in the probe's console in summary.md), after
#                          the peer, for at most --probe-seconds (default 60); not with
#                          --training (the window returns at most 8 files)
#   --no-cuda              configure with -DDCALIGN_CUDA=OFF (to test the plumbing on a machine
#                          whose CUDA backend does not compile)
#   --budget SECONDS       wall-clock budget of the whole script (default 290, 560 with --full);
#                          later steps get what is left, the summary is always written
#   --series-cap SECONDS   --max-seconds-per-series of the benchmark and the peer (default 4,
#                          5 with --full)
#   --jobs N               build jobs (default: all cores)
#   --build-dir DIR        default build-gpu
#   --prefix DIR           where the .debs are unpacked (default /tmp/dcalign-deps; wiped)
#   --bench-args "..."     extra arguments for gpu_bench (after the defaults, so they win)
#   --peer-args "..."      extra arguments for bench/torch_peer.py
#   --skip STEPS           comma-separated steps not to run: tests, sanitizer, bench, peer
#   --sanitizer-seconds N, --bench-seconds N, --peer-seconds N, --probe-seconds N
#                          the most each of these steps may take (defaults 90, 50, 50; with
#                          --full 90, 200, 150; each also gets no more than what the budget
#                          leaves after reserving time for the steps after it)
#   --memcheck-filter ERE, --racecheck-filter ERE
#                          which GPU tests (full gtest names, case-insensitive) each sanitizer
#                          runs; defaults: memcheck every test, racecheck RACECHECK_RE below
#
# Steps: (1) unpack .debs/*.deb with dpkg -x into the prefix and repair what dpkg -x leaves
# (alternatives symlinks such as libblas.so.3/liblapack.so.3 -> openblas-pthread, absolute
# symlinks, multiarch OpenSSL headers); (2) configure with explicit paths into the prefix for
# every dependency, the optional ones that are not bundled turned off (scripts/deps.sh
# cmake-off), and check CMakeCache.txt that the paths lie in the prefix; (3) build only the
# library, test_cuda, test_cuda_conformance and gpu_bench; (4) ctest -L gpu; (5) with
# DCALIGN_GPU_TEST_SMALL=1 (the tests' small shapes), compute-sanitizer memcheck over every GPU
# test program, racecheck and synccheck over the tests of dcalign's own kernels, side by side;
# (6) gpu_bench; (7) the PyTorch peer; (8) summary.md. A step that fails does not stop the
# independent steps after it. Exit status 0 only when every step passed and a GPU was used; with no usable GPU the
# script says "no usable GPU: <reason>", does what it can (unpack, configure, build, ctest,
# whose GPU tests then skip) and exits 1.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
START=$(date +%s)
ARGS="$*"

OUTDIR=""
WITH_LEARN=0
TRAINING=0
PROBE=0
PROBE_SECONDS=60
CUDA=ON
FULL=0
CONFIGURE_ONLY=0
BUDGET=""
SERIES_CAP=""
JOBS=$(nproc 2>/dev/null || echo 4)
BUILD=build-gpu
PREFIX=/tmp/dcalign-deps
BENCH_ARGS=""
PEER_ARGS=""
SKIP=","
SAN_SECONDS=90
BENCH_SECONDS=""
PEER_SECONDS=""
# memcheck: every test of every GPU test program (an empty filter); racecheck: the tests of
# dcalign's own kernels with shared memory (polar start / Newton step, the fused Newton phase
# and its polish, finiteness scans, reductions), both precisions, and synccheck on the same
# tests. When the racecheck default matches no test (renamed tests), the fallback after it is
# used.
MEMCHECK_RE=""
RACECHECK_RE='^CudaVsCpu/[0-9]+\.(PolarIteration|PolarNewtonPhase|PolarNewtonPolish|PolarBatched|NonFinite|Orthogonality|InnerProducts)|^CudaLarge\.'
RACECHECK_FALLBACK='polar|newton|reduc|sum_?squares|finite|orthogonal|norm'
while (($#)); do
  case $1 in
    --full) FULL=1 ;;
    --configure-only) CONFIGURE_ONLY=1 ;;
    --with-learn) WITH_LEARN=1 ;;
    --training) TRAINING=1 WITH_LEARN=1 ;;
    --probe) PROBE=1 ;;
    --probe-seconds) PROBE_SECONDS=$2; shift ;;
    --no-cuda) CUDA=OFF ;;
    --budget) BUDGET=$2; shift ;;
    --series-cap) SERIES_CAP=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --build-dir) BUILD=$2; shift ;;
    --prefix) PREFIX=$2; shift ;;
    --bench-args) BENCH_ARGS=$2; shift ;;
    --peer-args) PEER_ARGS=$2; shift ;;
    --skip) SKIP=",$2,"; shift ;;
    --sanitizer-seconds) SAN_SECONDS=$2; shift ;;
    --bench-seconds) BENCH_SECONDS=$2; shift ;;
    --peer-seconds) PEER_SECONDS=$2; shift ;;
    --memcheck-filter) MEMCHECK_RE=$2; shift ;;
    --racecheck-filter) RACECHECK_RE=$2; RACECHECK_FALLBACK=$2; shift ;;
    -h | --help)
      sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "gpu-check: unknown option $1" >&2
      exit 2
      ;;
    *) OUTDIR=$1 ;;
  esac
  shift
done
if [[ $PROBE -eq 1 && $TRAINING -eq 1 ]]; then
  echo "gpu-check: --probe and --training together would write 9 files; a GPU window returns 8: run them in two calls" >&2
  exit 2
fi
if [[ $FULL -eq 1 ]]; then
  BUDGET=${BUDGET:-560} SERIES_CAP=${SERIES_CAP:-5}
  BENCH_SECONDS=${BENCH_SECONDS:-200} PEER_SECONDS=${PEER_SECONDS:-150}
else
  BUDGET=${BUDGET:-290} SERIES_CAP=${SERIES_CAP:-4}
  BENCH_SECONDS=${BENCH_SECONDS:-50} PEER_SECONDS=${PEER_SECONDS:-50}
fi
OUTDIR=${OUTDIR:-${OUT:-$ROOT/gpu-check-out}}
mkdir -p "$OUTDIR" "$BUILD"
OUTDIR=$(cd "$OUTDIR" && pwd)
BUILD=$(cd "$BUILD" && pwd)
SUMMARY=$OUTDIR/summary.md
BUILD_LOG=$OUTDIR/build.log
CTEST_LOG=$OUTDIR/ctest.log
SAN_LOG=$OUTDIR/sanitizer.log
BENCH_JSON=$OUTDIR/gpu_bench.json
PEER_JSON=$OUTDIR/torch_peer.json
ENV_TXT=$OUTDIR/env.txt
TRAIN_LOG=$OUTDIR/training.log
PROBE_JSON=$OUTDIR/gpu_probe.json
PROBE_OUT=$BUILD/gpu_probe.console
BENCH_OUT=$BUILD/gpu_bench.console
PEER_OUT=$BUILD/torch_peer.console
rm -f "$SUMMARY" "$BUILD_LOG" "$CTEST_LOG" "$SAN_LOG" "$BENCH_JSON" "$PEER_JSON" "$ENV_TXT" \
  "$TRAIN_LOG" "$BENCH_OUT" "$PEER_OUT" "$PROBE_JSON" "$PROBE_OUT"
: >"$BUILD_LOG"
: >"$ENV_TXT"

ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
ORIG_PATH=$PATH
# The benchmark and test points: the l = 950 point last, since its slow series (GOPP, SVDs of
# 950 x 950 matrices) could otherwise use up the time of the (1000, 50, 10000) point.
POINTS="20000,50,50;1000,50,1000;1000,50,10000;1000,950,50"

# ---------------------------------------------------------------------------------------------
# Bookkeeping

elapsed() { echo $(($(date +%s) - START)); }
remaining() { echo $((BUDGET - $(elapsed))); }
# seconds for a step: min(want, remaining - reserve), or 0 when too little is left
allot() {
  local want=$1 reserve=$2 r
  r=$(($(remaining) - reserve))
  ((r > want)) && r=$want
  ((r < 0)) && r=0
  echo "$r"
}
say() { echo "[gpu-check $(printf '%4d' "$(elapsed)")s] $*"; }
STEPS=()
declare -A STATUS=() NOTE=()
record() {  # record STEP STATUS NOTE; STATUS: ok, FAIL, skipped, incomplete, unsupported
  STEPS+=("$1")
  STATUS[$1]=$2
  NOTE[$1]=$3
  say "$1: $2${3:+ - $3}"
}
COMMANDS=()
cmd_note() { COMMANDS+=("$*"); }
skipped() { [[ $SKIP == *",$1,"* ]]; }
# Runs a command with a time limit: timeout with a grace kill; prints the exit status.
limited() {
  local secs=$1
  shift
  timeout -k 10 "$secs" "$@"
}
truncate_log() {  # keep the last 2 MB
  local f=$1
  if [[ -f $f ]] && (($(stat -c %s "$f") > 2000000)); then
    tail -c 2000000 "$f" >"$f.tmp" && mv "$f.tmp" "$f"
    sed -i '1s/^/[... truncated to the last 2 MB ...]\n/' "$f"
  fi
}

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
cmd_note "for f in .debs/*.deb; do dpkg -x \$f $PREFIX; done  # + symlink repairs (scripts/gpu-check.sh)"
unpack
export LD_LIBRARY_PATH=$LDPATH${ORIG_LD_LIBRARY_PATH:+:$ORIG_LD_LIBRARY_PATH}
echo "LD_LIBRARY_PATH (dcalign steps)=$LD_LIBRARY_PATH" >>"$ENV_TXT"

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
configure

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
  # Only the configure rehearsal may pass without a GPU.
  [[ $GPU_OK -eq 1 || $CONFIGURE_ONLY -eq 1 ]] || FAILED=1
  {
    echo "# dcalign GPU check"
    echo
    if [[ $CONFIGURE_ONLY -eq 1 ]]; then
      echo "Verdict (--configure-only): **$([[ $FAILED -eq 0 ]] && echo PASSED || echo FAILED)** ($(elapsed) s)"
    elif [[ $GPU_OK -eq 1 ]]; then
      echo "Verdict: **$([[ $FAILED -eq 0 ]] && echo PASSED || echo FAILED)**${PARTIAL:+, not complete:$PARTIAL} ($(elapsed) s, budget $BUDGET s)"
    else
      echo "Verdict: **FAILED: no usable GPU: $GPU_REASON** ($(elapsed) s). Unpack, configure, build and"
      echo "ctest ran as far as they can without one."
    fi
    echo
    echo "| | |"
    echo "|---|---|"
    echo "| GPU (nvidia-smi name, driver, memory) | ${GPU_LINE:-none: $GPU_REASON} |"
    echo "| CUDA toolkit | $([[ -n $NVCC ]] && "$NVCC" --version | tail -2 | tr '\n' ' ' || echo 'nvcc not found') |"
    echo "| commit | $COMMIT (source fingerprint $FINGERPRINT) |"
    echo "| host | $(grep -h PRETTY_NAME /etc/os-release 2>/dev/null | cut -d= -f2 | tr -d '"'), $(nproc) cores, $(c++ --version 2>/dev/null | head -1), $(cmake --version 2>/dev/null | head -1) |"
    echo "| dependencies | .debs unpacked into $PREFIX; run-time path $LDPATH |"
    echo "| GPU tests (ctest -L gpu) | $TESTS_LINE |"
    echo
    echo "## Steps"
    echo
    echo "| step | status | details |"
    echo "|---|---|---|"
    for s in "${STEPS[@]}"; do
      echo "| $s | ${STATUS[$s]} | $(echo "${NOTE[$s]}" | tr '|' '/' | cut -c1-1500) |"
    done
    if [[ $CONFIGURE_ONLY -eq 0 ]]; then
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
    echo "Files: summary.md, env.txt (versions, unpacked packages, CMake cache paths, ldd), build.log$(
      [[ $CONFIGURE_ONLY -eq 1 ]] || echo ", ctest.log, sanitizer.log, gpu_bench.json, torch_peer.json")$(
      [[ $TRAINING -eq 1 ]] && echo ", training.log")$([[ $PROBE -eq 1 ]] && echo ", gpu_probe.json")."
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
  secs=$(allot "$BENCH_SECONDS" "$reserve")
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
  secs=$(allot "$PEER_SECONDS" 25)
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

# ---------------------------------------------------------------------------------------------
# 8. Summary

write_summary
if [[ $GPU_OK -ne 1 ]]; then
  echo "gpu-check: no usable GPU: $GPU_REASON"
fi
if [[ $FAILED -ne 0 ]]; then
  echo "gpu-check: FAILED (details in $SUMMARY)"
  exit 1
fi
echo "gpu-check: PASSED"
exit 0
