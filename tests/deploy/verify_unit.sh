#!/usr/bin/env bash
# Checks a systemd unit file with `systemd-analyze verify`:
#
#   tests/deploy/verify_unit.sh UNIT SERVER_BINARY
#
# The unit is copied into a temporary directory with /usr/local/bin/dcalign-server replaced by
# SERVER_BINARY (an absolute path: verify checks that every Exec binary exists and is executable).
# verify prints a problem of the file as "PATH:LINE: ..." (an unknown key, a bad value) or
# "NAME.service: ..." (a command that cannot be run) and exits 0 after some of them, so any such
# line fails the check, as does a non-zero exit status. Lines about other units (the system's
# own, which verify loads as dependencies) are shown but ignored.
# To be sure verify reports problems in this form here, a copy with a misspelt key must fail.
# Exit status: 0 passed, 1 failed, 2 usage, 77 skipped (no systemd-analyze; CTest's
# SKIP_RETURN_CODE).
set -euo pipefail

if (($# != 2)); then
  echo "usage: $0 UNIT SERVER_BINARY" >&2
  exit 2
fi
unit=$1
binary=$2
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "verify_unit: systemd-analyze is not installed: skipped"
  exit 77
fi
[[ -f $unit ]] || { echo "verify_unit: no unit file '$unit'" >&2; exit 2; }
[[ $binary == /* ]] || binary=$PWD/$binary
[[ -x $binary ]] || { echo "verify_unit: '$binary' is not an executable file" >&2; exit 2; }

name=$(basename "$unit")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/good" "$work/canary"
# '|' is the sed delimiter: the paths must not hold one.
[[ $binary != *'|'* ]] || { echo "verify_unit: '|' in the binary's path" >&2; exit 2; }
sed "s|/usr/local/bin/dcalign-server|$binary|g" "$unit" >"$work/good/$name"
if grep -q '/usr/local/bin/dcalign-server' "$work/good/$name" ||
  ! grep '^ExecStart=' "$work/good/$name" | grep -qF "=$binary "; then
  echo "verify_unit: could not point ExecStart of $unit at $binary" >&2
  exit 1
fi

# check FILE: prints verify's output; returns 0 when nothing in it names FILE and verify
# exited 0, 1 otherwise.
check() {
  local file=$1 out status=0 problems
  out=$(systemd-analyze verify "$file" 2>&1) || status=$?
  [[ -z $out ]] || printf '%s\n' "$out" | sed 's/^/  verify: /'
  problems=$(printf '%s\n' "$out" | grep -F -e "$file:" -e "$name:" || true)
  if ((status != 0)) || [[ -n $problems ]]; then
    ((status == 0)) || echo "  systemd-analyze verify exited $status"
    return 1
  fi
  return 0
}

# The canary: an unknown key right after [Service].
sed 's/^\[Service\]$/[Service]\nDcalignVerifyCanary=yes/' "$work/good/$name" >"$work/canary/$name"
grep -q '^DcalignVerifyCanary=' "$work/canary/$name" || {
  echo "verify_unit: $unit has no [Service] section" >&2
  exit 1
}
echo "verify_unit: a copy with a misspelt key (must be reported):"
if check "$work/canary/$name"; then
  echo "verify_unit: FAILED: systemd-analyze verify did not report the misspelt key" \
    "DcalignVerifyCanary in a form this script recognises: it cannot check $unit here" >&2
  exit 1
fi

echo "verify_unit: $unit (ExecStart=$binary):"
if ! check "$work/good/$name"; then
  echo "verify_unit: FAILED: systemd-analyze verify reports problems in $unit (above)" >&2
  exit 1
fi
echo "verify_unit: $unit verified ($(systemd-analyze --version | head -n 1))"
