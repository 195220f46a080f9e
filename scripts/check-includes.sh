#!/usr/bin/env bash
# The layering rule of issue 29: a backend's private headers are its own. Fails (exit 1, naming
# every file and line) when a file outside src/cpu includes "cpu/...", or a file outside src/cuda
# and kernels/ includes "cuda/...". Checked: the library (src, include, kernels) and the Python
# module; tests and benchmarks of a backend's internals may include them.
#
#   scripts/check-includes.sh [ROOT]     (default: the repository)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
bad=0
while IFS= read -r -d '' f; do
  rel=${f#./}
  case $rel in
    src/cpu/*) ;;
    *) if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"cpu/' "$f" | sed "s|^|$rel:|"; then
         bad=1
       fi ;;
  esac
  case $rel in
    src/cuda/* | kernels/*) ;;
    *) if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"cuda/' "$f" | sed "s|^|$rel:|"; then
         bad=1
       fi ;;
  esac
done < <(find ./src ./include ./kernels ./python -type f \
              \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
              -print0 2>/dev/null)
if ((bad)); then
  echo "check-includes: the files above include another layer's backend-private header" \
       "(cpu/... outside src/cpu, cuda/... outside src/cuda and kernels/); use the Primitives" \
       "interface, src/base or src/backends/backends.hpp instead" >&2
  exit 1
fi
echo "check-includes: no file includes another backend's private headers"
