#!/usr/bin/env bash
# The Python client of dcalign-server (python/dcalign_client): generates its gRPC stubs from
# proto/ into a temporary copy of the package (protoc + grpc_python_plugin; Debian:
# protobuf-compiler protobuf-compiler-grpc), then runs its unittest suite with /usr/bin/python3
# (Debian: python3-grpcio python3-protobuf python3-numpy) against the server binary.
#   DCALIGN_SERVER  the dcalign-server to test against (default: build/src/cli/dcalign-server)
#   DCALIGN_PYTHON  the interpreter (default: /usr/bin/python3)
# The service is optional in CMake: without the binary only the tests that need no server run
# and the rest are skipped with a message (exit 0), except under CI=true, where that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${DCALIGN_PYTHON:-/usr/bin/python3}
export DCALIGN_SERVER=${DCALIGN_SERVER:-$root/build/src/cli/dcalign-server}
[[ $DCALIGN_SERVER = /* ]] || DCALIGN_SERVER=$root/$DCALIGN_SERVER
if [[ ! -x $DCALIGN_SERVER ]]; then
  if [[ ${CI:-} == true ]]; then
    echo "test-python-client: FAILED: $DCALIGN_SERVER was not built (CI=true requires it)" >&2
    exit 1
  fi
  echo "test-python-client: SKIPPING the server tests: $DCALIGN_SERVER was not built" \
       "(the service is optional in CMake); running only the tests that need no server" >&2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dcalign-python-client.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp -r python/dcalign_client/dcalign_client "$tmp/"
rm -rf "$tmp/dcalign_client/_proto" "$tmp/dcalign_client/__pycache__"
"$py" python/dcalign_client/generate_stubs.py --proto-dir proto --out "$tmp/dcalign_client/_proto" >/dev/null
# From outside the checkout, so that `import dcalign_client` is the copy with the stubs.
tests=$root/python/dcalign_client/tests
cd "$tmp"
PYTHONPATH=$tmp PYTHONDONTWRITEBYTECODE=1 "$py" -m unittest discover -s "$tests" -t "$tests" -v
