#!/usr/bin/env bash
# Tests the wheel of scripts/build-wheel.sh where nothing else is installed:
#  1. reference results: every method through the source build's `dcalign align`
#     (build/src/cli/dcalign) on one set of anchors;
#  2. a fresh virtual environment (no system packages) with NumPy from PyPI and the wheel;
#  3. in a private mount namespace (unshare --mount: root) whose /usr/lib hides the libraries the
#     build linked and the wheel bundles (OpenBLAS, BLAS/LAPACK, libgfortran, libquadmath,
#     libgomp, libLBFGS): `import dcalign`, every method on NumPy arrays equal to the references,
#     the OpenBLAS that runs is the wheel's own (the process's maps) and blas_info() names a
#     kernel set of this CPU (the source build's);
#  4. outside it, with the system's PyTorch: every method on a torch tensor, equal too;
#  5. start-up: `python -c "import dcalign"` of the wheel against the source build's module
#     (--source-python, an interpreter with `pip install .`'s module), whole processes,
#     interleaved, 15 each: the wheel's median may be at most 1.5 times the source build's.
#
# Usage: scripts/test-wheel.sh [--source-python PY]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
say() { echo "test-wheel: $*"; }
if [[ ${1:-} == --inside ]]; then
  # In the namespace: hide the bundled libraries, then run the checks with the wheel's venv.
  work=$2
  exec bash "$root/scripts/hide-wheel-libs.sh" "$work/ovl" \
    "$work/venv/bin/python" "$root/python/tests/wheel_check.py" --refs "$work/refs" --hidden
fi

source_py=""
while (($#)); do
  case $1 in
    --source-python) source_py=$2; shift 2 ;;
    *) echo "test-wheel: unknown argument $1" >&2; exit 2 ;;
  esac
done
out=${DCALIGN_WHEEL_DIR:-$root/build/wheel}
wheel=$(ls "$out"/dist/dcalign-*.whl 2>/dev/null | head -n 1)
[[ -n $wheel ]] || { echo "test-wheel: no wheel in $out/dist: run scripts/build-wheel.sh" >&2; exit 1; }
cli=${DCALIGN_CLI:-$root/build/src/cli/dcalign}
[[ -x $cli ]] || { echo "test-wheel: $cli not found: run scripts/build.sh" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] && unshare --mount --propagation private true 2>/dev/null ||
  { echo "test-wheel: FAILED: 'unshare --mount' needs root (it hides the system's libraries)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dcalign-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

say "$(basename "$wheel")"
/usr/bin/python3 "$root/python/tests/wheel_check.py" --refs "$work/refs" --make-refs "$cli"
"$cli" --version | sed -n 's/^BLAS: /reference BLAS: /p' | sed 's/^/test-wheel: /'

/usr/bin/python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check numpy
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$wheel"
status=0
say "with the system's libraries hidden"
unshare --mount --propagation private -- bash "$root/scripts/test-wheel.sh" --inside "$work" || status=1

say "on torch tensors (the system's PyTorch)"
/usr/bin/python3 -m venv --system-site-packages "$work/venv-torch"
"$work/venv-torch/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$wheel"
(cd "$work" && "$work/venv-torch/bin/python" "$root/python/tests/wheel_check.py" --refs "$work/refs" --torch) || status=1

if [[ -n $source_py ]]; then
  say "start-up: import dcalign, the wheel against the source build, interleaved"
  (cd "$work" && /usr/bin/python3 "$root/python/tests/wheel_check.py" --import-time \
    "$work/venv/bin/python" "$source_py") || status=1
fi
((status == 0)) && say "passed" || say "FAILED"
exit $status
