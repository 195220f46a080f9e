#!/usr/bin/env bash
# Python bindings (issue 11): `pip install .` into a fresh virtual environment, then the pytest
# suite python/tests. scikit-build-core, pybind11, NumPy and pytest come from PyPI, so this step
# needs network access to PyPI and fails (it does not skip) without it. The module build compiles
# the dcalign core once (no CUDA, learning layer, tests or benchmarks), with nproc jobs.
# DCALIGN_PYTHON picks the interpreter (default /usr/bin/python3; Debian: python3-venv, python3-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${DCALIGN_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dcalign-python.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$py" -m venv "$tmp/venv" || { echo "test-python: '$py -m venv' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
vpy=$tmp/venv/bin/python
export PIP_DISABLE_PIP_VERSION_CHECK=1
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
if ! "$vpy" -m pip install --quiet pytest; then
  echo "test-python: FAILED to install pytest from PyPI (no network?); the Python tests did not run" >&2
  exit 1
fi
echo "test-python: pip install . (build in $tmp/build, $CMAKE_BUILD_PARALLEL_LEVEL jobs)"
if ! "$vpy" -m pip install "$root" --config-settings=build-dir="$tmp/build"; then
  echo "test-python: FAILED: pip install . (the module build, or scikit-build-core/pybind11 from PyPI)" >&2
  exit 1
fi
# From outside the checkout, so that `import dcalign` is the installed module.
cd "$tmp"
"$vpy" -m pytest -q -p no:cacheprovider "$root/python/tests"
