#!/usr/bin/env bash
# The file-length rule: no source file of the library, the Python packages, the benchmarks or
# the scripts (src, include, kernels, python, bench, scripts: C++, CUDA, Python, shell) is over
# 600 lines without a stated reason. A reason is a line "PATH REASON" in
# scripts/file-length-allow.txt; an entry for a file that is no longer over the limit (or gone)
# is refused too, so the list cannot go stale. Exit 1 naming every offender.
#
#   scripts/check-file-length.sh [ROOT]     (default: the repository)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
limit=600
allow=scripts/file-length-allow.txt
declare -A reason=()
if [[ -f $allow ]]; then
  while read -r path why; do
    [[ -z $path || $path == \#* ]] && continue
    [[ -n $why ]] || { echo "check-file-length: $allow: '$path' has no reason" >&2; exit 1; }
    reason[$path]=$why
  done < "$allow"
fi
bad=0
while IFS= read -r -d '' f; do
  rel=${f#./}
  n=$(wc -l < "$f")
  if ((n > limit)) && [[ -z ${reason[$rel]:-} ]]; then
    echo "$rel: $n lines (the limit is $limit; split it, or state why in $allow)"
    bad=1
  fi
done < <(find ./src ./include ./kernels ./python ./bench ./scripts -type f \
              \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
                 -o -name '*.py' -o -name '*.sh' \) -not -path './bench/results/*' -print0 \
              2>/dev/null)
for path in "${!reason[@]}"; do
  if [[ ! -f $path ]]; then
    echo "$allow: '$path' does not exist"
    bad=1
  elif (($(wc -l < "$path") <= limit)); then
    echo "$allow: '$path' is within $limit lines now; remove its entry"
    bad=1
  fi
done
((bad)) && exit 1
echo "check-file-length: every file is within $limit lines or states why"
