#!/usr/bin/env bash
# Rehearses, here, the configure step of scripts/gpu-check.sh as the bare GPU machine sees it:
# fills .debs/ (scripts/gpu-bundle.sh; needs network to Debian), then, in a private mount
# namespace (unshare --mount: root; the mounts vanish with the namespace), hides every
# development file of the system that a bare machine with a C++ compiler and the CUDA toolkit
# would not have, and runs `gpu-check.sh --configure-only` (unpack into a prefix, configure
# with CUDA when nvcc is present). Fails when the configure fails, which is what a package
# missing from the bundle does, or when a path in CMakeCache.txt lies outside the bundle's
# prefix, the CUDA toolkit, the compiler's own files and /usr/bin. Part of scripts/test.sh.
#
# Usage: scripts/gpu-rehearse.sh [--no-bundle] [--no-update]
#        scripts/gpu-rehearse.sh --wheel-only --python PY [--wheel-dir DIR]
#   --no-bundle   use .debs/ as it is (do not run gpu-bundle.sh)
#   --no-update   passed to gpu-bundle.sh (skip apt-get update)
#   --wheel-only  instead: the wheel step of gpu-check.sh (--wheel-only --wheel-cpu) up to where
#                 it needs a GPU, in about 15 s: the wheel of PY's tag from DIR (default
#                 build/wheel/dist, scripts/build-wheel.sh's) installed --no-deps into a fresh
#                 venv that sees PY's PyTorch, its smoke check (import, every method, the
#                 wheel's own OpenBLAS) in a private mount namespace whose /usr/lib hides the
#                 system's OpenBLAS, BLAS, LAPACK, libgfortran, libquadmath, libgomp and libLBFGS
#                 (scripts/hide-wheel-libs.sh, as for test-wheel.sh; NumPy from PyPI there, since
#                 Debian's links the system's BLAS), `pytest -m gpu python/tests` (the gpu
#                 tests collected and skipped) and examples/python/torch_training.py with
#                 --device cpu instead of cuda. The pytest and example runs see the system's
#                 libraries: Debian's PyTorch links that same OpenBLAS/LAPACK/libgomp. PY: an
#                 interpreter with PyTorch and pytest (scripts/test-python.sh passes its torch
#                 environment's). Outputs: build-gpu-rehearse/wheel-out/ (summary.md, env.txt,
#                 wheel.log). Fails unless the step passed and the gpu tests were collected.
#
# Hidden: /usr/include except the files of the compiler's packages (scripts/deps.sh
# never-bundled: libc6-dev, linux-libc-dev, libstdc++-N-dev, ...), copied into a tmpfs bound
# over it; in overlays over /usr/lib and /usr/local (upper layers in the tmpfs), every lib*.so
# symbolic link, lib*.a and lib*.la, every file under cmake/ and pkgconfig/ directories and
# /usr/local/include's entries, unless the compiler's or resolving into the CUDA toolkit; tmpfs
# over /usr/share/cmake and /usr/share/pkgconfig. Runtime libraries (lib*.so.N, and real lib*.so
# files such as binutils' libbfd-2.40-system.so) stay, so the tools keep working.
# Outputs: build-gpu-rehearse/ (git-ignored): the build tree and OUTDIR out/ (summary.md,
# env.txt, build.log).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
REHEARSE=$ROOT/build-gpu-rehearse

say() { echo "gpu-rehearse: $*"; }

if [[ ${1:-} == --inside ]]; then
  # In the namespace: $2 = a scratch directory for the mounts, $3 = the bundle's prefix.
  work=$2 prefix=$3
  export LC_ALL=C  # one collation for sort and comm
  nvcc=$(command -v nvcc || true)
  [[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
  cuda_root=""
  [[ -n $nvcc ]] && cuda_root=$(readlink -f "$(dirname "$nvcc")/..")
  # The compiler's files (what gpu-bundle.sh assumes any C++ machine has).
  never=$(bash scripts/deps.sh never-bundled)
  mapfile -t compiler_pkgs < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' |
    awk '$2 ~ /^ii/ {print $1}' | grep -E "$never")
  # dpkg lists some files under /lib, /bin (merged /usr): both spellings.
  dpkg -L "${compiler_pkgs[@]}" 2>/dev/null | sed -E 'p; s#^/(lib|lib64|bin|sbin)/#/usr/\1/#' |
    sort -u >"$work/keep"
  mount -t tmpfs tmpfs "$work/t"
  # /usr/include: only the compiler's headers.
  mkdir -p "$work/t/root"
  grep '^/usr/include/' "$work/keep" | while read -r f; do [[ -d $f && ! -L $f ]] || echo "${f#/}"; done |
    tar -C / --no-recursion -cf - -T - | tar -C "$work/t/root" -xf -
  mkdir -p "$work/t/root/usr/include"
  mount --bind "$work/t/root/usr/include" /usr/include
  # /usr/lib and /usr/local: overlays whose deletions hide the development files.
  for d in /usr/lib /usr/local; do
    n=$(basename "$d")
    mkdir -p "$work/t/$n-upper" "$work/t/$n-work"
    mount -t overlay overlay -o "lowerdir=$d,upperdir=$work/t/$n-upper,workdir=$work/t/$n-work" "$d"
  done
  # A development lib*.so is a symbolic link to the runtime library; a real lib*.so file is a
  # runtime library itself (binutils' libbfd-2.40-system.so, NSS) that tools load.
  dev_libs=(\( -type l -name 'lib*.so' \) -o \( \( -type f -o -type l \) \( -name 'lib*.a' -o -name 'lib*.la' \) \))
  {
    find /usr/lib/x86_64-linux-gnu -path /usr/lib/x86_64-linux-gnu/gconv -prune -o \( "${dev_libs[@]}" \) -print
    find /usr/lib /usr/local/lib -maxdepth 1 \( "${dev_libs[@]}" \) -print
    find /usr/lib/x86_64-linux-gnu/cmake /usr/lib/x86_64-linux-gnu/pkgconfig /usr/lib/cmake \
      /usr/lib/pkgconfig /usr/local/lib/cmake /usr/local/lib/pkgconfig /usr/local/share/cmake \
      /usr/local/share/pkgconfig \( -type f -o -type l \) -print 2>/dev/null || true
    find /usr/local/include -mindepth 1 -maxdepth 1 -print 2>/dev/null || true
  } | sort -u | comm -23 - "$work/keep" | while read -r f; do
    # The CUDA toolkit stays (it may be linked into /usr/local/include and /usr/local/lib).
    [[ -n $cuda_root && $(readlink -f "$f") == "$cuda_root"/* ]] || echo "$f"
  done >"$work/hidden"
  xargs -d '\n' -r rm -rf <"$work/hidden"
  for d in /usr/share/cmake /usr/share/pkgconfig; do
    [[ -d $d ]] && mount -t tmpfs tmpfs "$d"
  done
  say "hidden: /usr/include but $(grep -c '^/usr/include/' "$work/keep") entries of ${#compiler_pkgs[@]}" \
    "compiler packages, $(wc -l <"$work/hidden") development files in /usr/lib and /usr/local," \
    "/usr/share/cmake, /usr/share/pkgconfig"
  # Does the hiding work? A header and a library of the bundle must be gone from the system.
  for f in /usr/include/lbfgs.h /usr/include/zlib.h /usr/lib/x86_64-linux-gnu/libz.so; do
    if [[ -e $f ]]; then
      say "FAILED: $f is still visible after hiding"
      exit 1
    fi
  done

  rc=0
  bash scripts/gpu-check.sh "$REHEARSE/out" --configure-only --build-dir "$REHEARSE/build" \
    --prefix "$prefix" || rc=$?
  if [[ $rc -ne 0 ]]; then
    say "FAILED: gpu-check.sh --configure-only exited $rc without the system's development files" \
      "(a package missing from scripts/deps.sh's lib group?):"
    grep -E -A4 'CMake Error' "$REHEARSE/out/build.log" | head -30 || true
    grep -E '^  (MISSING|OUTSIDE) ' "$REHEARSE/out/env.txt" || true
    exit 1
  fi
  # Every path the configure cached (FILEPATH, PATH) must come from the bundle's prefix, the
  # CUDA toolkit, the compiler's packages or be a program in a bin directory.
  outside="" checked=0
  while IFS= read -r line; do
    key=${line%%:*} value=${line#*=}
    IFS=';' read -r -a items <<<"$value"
    for v in "${items[@]}"; do
      [[ $v == /* ]] || continue
      checked=$((checked + 1))
      real=$(readlink -f "$v" 2>/dev/null || echo "$v")
      if [[ $v == "$prefix"/* || $v == "$ROOT"/* ]]; then continue; fi
      if [[ -n $cuda_root && $real == "$cuda_root"/* ]]; then continue; fi
      if [[ $v =~ ^/(usr/)?(local/)?s?bin/ && -x $v ]]; then continue; fi
      if grep -qxF -e "$v" -e "$real" "$work/keep"; then continue; fi
      outside+="  $key = $v"$'\n'
    done
  done < <(grep -E '^[A-Za-z_][A-Za-z0-9_]*:(FILEPATH|PATH)=.' "$REHEARSE/build/CMakeCache.txt" |
    grep -vE '^CMAKE_(INSTALL_[A-Z]*|CACHEFILE_DIR|HOME_DIRECTORY):' | grep -v -- '-NOTFOUND$')
  if [[ -n $outside ]]; then
    say "FAILED: cached paths outside the bundle's prefix $prefix:"
    printf '%s' "$outside"
    exit 1
  fi
  say "configure passed with only the bundle; the $checked paths in CMakeCache.txt lie in the" \
    "prefix, the CUDA toolkit, the compiler's files or bin directories"
  exit 0
fi

bundle=1
update=()
wheel_only=0 wheel_py="" wheel_dir=""
while (($#)); do
  arg=$1
  case $arg in
    --no-bundle) bundle=0 ;;
    --no-update) update=(--no-update) ;;
    --wheel-only) wheel_only=1 ;;
    --python) wheel_py=${2:?--python needs an interpreter}; shift ;;
    --wheel-dir) wheel_dir=${2:?--wheel-dir needs a directory}; shift ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "gpu-rehearse: unknown argument '$arg'" >&2
      exit 2
      ;;
  esac
  shift
done
if [[ $(id -u) -ne 0 ]]; then
  say "FAILED: needs root (a mount namespace with overlay and tmpfs mounts)"
  exit 1
fi
if ! unshare --mount --propagation private true 2>/dev/null; then
  say "FAILED: 'unshare --mount' does not work here (no CAP_SYS_ADMIN?)"
  exit 1
fi
start=$SECONDS
if [[ $wheel_only -eq 1 ]]; then
  [[ -n $wheel_py ]] || { say "FAILED: --wheel-only needs --python PY (with PyTorch)"; exit 2; }
  work=$(mktemp -d "${TMPDIR:-/tmp}/dcalign-rehearse-wheel.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$REHEARSE"
  # Debian's NumPy links the system's BLAS too: the smoke check gets NumPy from PyPI instead.
  if ! "$wheel_py" -m pip install --quiet --disable-pip-version-check --target "$work/numpy" \
    numpy >"$work/pip.log" 2>&1; then
    cat "$work/pip.log"
    say "FAILED: $wheel_py -m pip install --target numpy (PyPI) failed"
    exit 1
  fi
  rc=0
  DCALIGN_WHEEL_SMOKE_WRAP="unshare --mount --propagation private -- bash $ROOT/scripts/hide-wheel-libs.sh $work/hide env PYTHONPATH=$work/numpy" \
    bash scripts/gpu-check.sh "$REHEARSE/wheel-out" --wheel-only --wheel-cpu --python "$wheel_py" \
    --wheel-dir "${wheel_dir:-${DCALIGN_WHEEL_DIR:-$ROOT/build/wheel}/dist}" \
    --build-dir "$REHEARSE/wheel-build" --budget 170 || rc=$?
  log=$REHEARSE/wheel-out/wheel.log
  grep -E '^hide-wheel-libs: (hidden|FAILED)|^wheel_smoke: (OpenBLAS|ok|FAILED)|::.* (PASSED|SKIPPED|FAILED)|^SKIPPED \[|^torch_training.py: ' \
    "$log" 2>/dev/null | sed 's/^/  /'
  # The gpu tests must have been collected (and, with no GPU here, skipped), and the smoke
  # check must have run with the libraries hidden.
  if ((rc == 0)) && ! grep -qE '::[^ ]+ SKIPPED' "$log"; then
    say "FAILED: no gpu test was collected and skipped (wheel.log)"
    rc=1
  fi
  if ((rc == 0)) && ! grep -q '^hide-wheel-libs: hidden in /usr/lib' "$log"; then
    say "FAILED: the smoke check did not run with the system's libraries hidden (wheel.log)"
    rc=1
  fi
  say "wheel step $([[ $rc -eq 0 ]] && echo passed || echo FAILED) in $((SECONDS - start)) s" \
    "(summary: ${REHEARSE#"$ROOT"/}/wheel-out/summary.md)"
  exit "$rc"
fi
if [[ $bundle -eq 1 ]]; then bash scripts/gpu-bundle.sh "${update[@]}"; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/dcalign-rehearse.XXXXXX")
# The namespace's mounts end with it; what remains is plain directories.
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/t" "$REHEARSE"
rc=0
# The prefix lies in the namespace's tmpfs: unpacked in memory, gone with the namespace.
unshare --mount --propagation private -- bash "$ROOT/scripts/gpu-rehearse.sh" --inside "$work" \
  "$work/t/deps" || rc=$?
say "$([[ $rc -eq 0 ]] && echo passed || echo FAILED) in $((SECONDS - start)) s" \
  "(summary: ${REHEARSE#"$ROOT"/}/out/summary.md)"
exit "$rc"
