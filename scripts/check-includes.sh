#!/usr/bin/env bash
# The layering rules of includes. Fails (exit 1, naming every file and line) when:
#   - a file outside src/cpu includes "cpu/...", or a file outside src/cuda and kernels/ includes
#     "cuda/..." (a backend's private headers are its own; checked: the library in src, include
#     and kernels, and the Python module; tests and benchmarks of a backend's internals may
#     include them);
#   - the Python module, an example or a benchmark includes "dcalign/detail/..." (internals that
#     the public headers use and may change in any release; the library and its tests may).
#
#   scripts/check-includes.sh [ROOT]     (default: the repository)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
bad=0
detail=0
# The lines of file $1 that include a header under the prefix $2, named "file:line:".
includes() {
  grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]$2" "$1" | sed "s|^|${1#./}:|"
}
while IFS= read -r -d '' f; do
  rel=${f#./}
  case $rel in
    src/cpu/* | examples/* | bench/*) ;;
    *) if includes "$f" 'cpu/'; then bad=1; fi ;;
  esac
  case $rel in
    src/cuda/* | kernels/* | examples/* | bench/*) ;;
    *) if includes "$f" 'cuda/'; then bad=1; fi ;;
  esac
  case $rel in
    python/* | examples/* | bench/*) if includes "$f" 'dcalign/detail/'; then detail=1; fi ;;
  esac
done < <(find ./src ./include ./kernels ./python ./examples ./bench -type f \
              \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
              -print0 2>/dev/null)
if ((bad)); then
  echo "check-includes: the files above include another layer's backend-private header" \
       "(cpu/... outside src/cpu, cuda/... outside src/cuda and kernels/); use the Primitives" \
       "interface, src/base or src/backends/backends.hpp instead" >&2
fi
if ((detail)); then
  echo "check-includes: the files above include dcalign/detail/ headers, which are the" \
       "library's internals; use the public headers of include/dcalign/" >&2
fi
((bad || detail)) && exit 1
echo "check-includes: no file includes another backend's private headers or dcalign/detail/"
