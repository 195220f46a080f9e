#!/usr/bin/env bash
# Python bindings: `pip install .` into a fresh virtual environment, then the pytest
# suite python/tests. scikit-build-core, pybind11, NumPy and pytest come from PyPI, so this step
# needs network access to PyPI and fails (it does not skip) without it. The module build compiles
# the dcalign core once (no CUDA, learning layer, tests or benchmarks), with nproc jobs; a second
# environment then adds the learning layer and PyTorch (below).
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

# The wheel (scripts/build-wheel.sh: the sdist, a wheel built from it, repaired by auditwheel)
# and its tests where the system's libraries are hidden, against this environment's source build
# (scripts/test-wheel.sh: results, the bundled OpenBLAS, torch tensors, import time).
cd "$root"
bash scripts/build-wheel.sh
bash scripts/test-wheel.sh --source-python "$vpy"

# PyTorch and the experiments: Debian's python3-torch (scripts/deps.sh) is importable
# only beside the system's NumPy, so a second environment sees the system's packages. The module
# is installed there with the learning layer (DCALIGN_WITH_LEARN=ON: Debian's LibTorch, LIBSVM,
# XGBoost, toml++; the shared build directory adds it to the first build), and the same suite
# runs against that NumPy (1.24 on Debian 12, which the first environment does not test) with
# the torch tests and the experiment tests, which compare with the dcalign command of the build
# ($DCALIGN_CLI, default build/src/cli/dcalign); then examples/python/torch_training.py.
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "test-python: FAILED: PyTorch is not importable by $py (Debian: apt-get install python3-torch, which scripts/install-deps.sh installs); the torch tests and examples/python/torch_training.py did not run" >&2
  exit 1
fi
if [[ -z ${DCALIGN_CLI:-} && -x $root/build/src/cli/dcalign ]]; then
  export DCALIGN_CLI=$root/build/src/cli/dcalign
fi
cd "$root"
"$py" -m venv --system-site-packages "$tmp/venv-torch"
tpy=$tmp/venv-torch/bin/python
"$tpy" -m pip install --quiet pytest -r "$root/docs/requirements-pypi.txt" mypy==1.18.2 \
  pybind11-stubgen==2.5.5
echo "test-python: with the system's NumPy and PyTorch ($("$tpy" -c 'import numpy, torch; print("NumPy", numpy.__version__, "PyTorch", torch.__version__)')) and the learning layer; the command: ${DCALIGN_CLI:-none}"
if ! "$tpy" -m pip install --quiet "$root" --config-settings=build-dir="$tmp/build" \
  --config-settings=cmake.define.DCALIGN_WITH_LEARN=ON; then
  echo "test-python: FAILED: pip install . with DCALIGN_WITH_LEARN=ON" >&2
  exit 1
fi
cd "$tmp"
"$tpy" -m pytest -q -p no:cacheprovider -rs "$root/python/tests"
# Types: the compiled module's stub is the bindings' (python/stubgen.py --check), and the examples
# and a typed usage file pass mypy --strict against the installed package.
"$tpy" "$root/python/stubgen.py" --check
(cd "$root" && "$tpy" -m mypy --strict --no-incremental examples/python python/tests/typed_usage.py)
"$tpy" "$root/python/tests/typed_usage.py"
# The examples of the docstrings (the Python API reference renders them) run as doctests.
"$tpy" -m pytest -q -p no:cacheprovider --doctest-modules \
  "$("$tpy" -c 'import dcalign, os; print(os.path.dirname(dcalign.__file__))')"
out=$("$tpy" "$root/examples/python/torch_training.py" --device cpu)
echo "$out"
grep -q "^torch_training.py: ok$" <<<"$out" || {
  echo "test-python: FAILED: examples/python/torch_training.py did not report ok" >&2
  exit 1
}

# The GPU machine's wheel step (scripts/gpu-check.sh --wheel), rehearsed up to where it needs a
# GPU with this environment's PyTorch and pytest and the wheel built above, about 10 s
# (scripts/gpu-rehearse.sh --wheel-only: the gpu tests collected and skipped, torch_training.py
# on the CPU).
cd "$root"
bash scripts/gpu-rehearse.sh --wheel-only --python "$tpy"

# The documentation (scripts/test-docs.sh) with this environment, which has the module with the
# learning layer, PyTorch, and the documentation's tools (Debian's Sphinx, MyST, Breathe and
# Selenium; Sybil and Furo from docs/requirements-pypi.txt): the site built with warnings as
# errors, every example of README.md and docs/ run, the pages checked in headless Chromium.
cd "$root"
bash scripts/test-docs.sh --python "$tpy"
