#!/usr/bin/env bash
# Runs scripts/check-file-length.sh on a scratch tree: passes only if the check fails on a
# 601-line source file and on an allow-list entry for a short one, naming both, and passes once
# the long file states its reason.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dcalign-length.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/bench" "$tmp/scripts"
seq 1 601 | sed 's|^|// |' > "$tmp/src/long.cpp"
seq 1 10 | sed 's|^|# |' > "$tmp/bench/short.py"
echo "bench/short.py it was long once" > "$tmp/scripts/file-length-allow.txt"
out=$(bash "$here/../../scripts/check-file-length.sh" "$tmp" 2>&1)
rc=$?
echo "$out"
[[ $rc -ne 0 ]] || { echo "expect_long_file: the check passed on a tree with violations"; exit 1; }
for want in 'src/long.cpp: 601 lines' "'bench/short.py' is within 600 lines now"; do
  [[ $out == *"$want"* ]] || { echo "expect_long_file: '$want' not named"; exit 1; }
done
echo "src/long.cpp a reason" > "$tmp/scripts/file-length-allow.txt"
bash "$here/../../scripts/check-file-length.sh" "$tmp" ||
  { echo "expect_long_file: a stated reason was not accepted"; exit 1; }
