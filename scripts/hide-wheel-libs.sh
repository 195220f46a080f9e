#!/usr/bin/env bash
# Hides, under /usr/lib, the system libraries that dcalign's wheel bundles (OpenBLAS, BLAS,
# LAPACK, libgfortran, libquadmath, libgomp, libLBFGS), checks that they are gone, then runs
# COMMAND: the wheel must work without them. Run it inside a private mount namespace (root;
# `unshare --mount --propagation private`): the deletions happen in an overlay over /usr/lib whose
# upper layer is a tmpfs mounted at WORK, and vanish with the namespace. Used by
# scripts/test-wheel.sh and scripts/gpu-rehearse.sh --wheel-only.
#
# Usage: scripts/hide-wheel-libs.sh WORK COMMAND [ARG...]
set -euo pipefail
say() { echo "hide-wheel-libs: $*"; }
work=${1:?usage: hide-wheel-libs.sh WORK COMMAND [ARG...]}
shift
(($#)) || { say "FAILED: no command to run"; exit 2; }
mkdir -p "$work"
mount -t tmpfs tmpfs "$work"
mkdir -p "$work/upper" "$work/work"
mount -t overlay overlay -o "lowerdir=/usr/lib,upperdir=$work/upper,workdir=$work/work" /usr/lib
hidden=0
while IFS= read -r f; do rm -rf "$f" && hidden=$((hidden + 1)); done < <(
  find /usr/lib -maxdepth 3 \( -name 'libopenblas*' -o -name 'libblas.so*' -o -name 'liblapack.so*' \
    -o -name 'libgfortran.so*' -o -name 'libquadmath.so*' -o -name 'libgomp.so*' \
    -o -name 'liblbfgs*.so*' -o -name 'openblas-pthread' \) 2>/dev/null)
for f in /usr/lib/x86_64-linux-gnu/libopenblas.so.0 /usr/lib/x86_64-linux-gnu/libgfortran.so.5 \
  /usr/lib/x86_64-linux-gnu/liblbfgs.so.0; do
  if [[ -e $f ]]; then
    say "FAILED: $f is still visible after hiding"
    exit 1
  fi
done
say "hidden in /usr/lib: $hidden files and directories (OpenBLAS, BLAS, LAPACK, libgfortran, libquadmath, libgomp, libLBFGS)"
exec "$@"
