#!/usr/bin/env bash
# Runs scripts/check-includes.sh on the fixture: passes only if the check fails and names every
# violating line (a backend's private header in src/core and src/privacy, dcalign/detail/ in an
# example).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(bash "$here/../../scripts/check-includes.sh" "$here/fixture" 2>&1)
rc=$?
echo "$out"
[[ $rc -ne 0 ]] || { echo "expect_violations: the check passed on a tree with violations"; exit 1; }
for want in 'src/core/bad.cpp:2:' 'src/privacy/bad_cuda.cpp:2:' 'examples/bad_detail.cpp:2:'; do
  [[ $out == *"$want"* ]] || { echo "expect_violations: '$want' not named"; exit 1; }
done
