#!/usr/bin/env bash
# Installs every Debian package dcalign needs to build, test and benchmark (clang and
# libclang-rt-14-dev, libomp-dev: the libFuzzer targets; llvm: llvm-symbolizer for sanitizer reports).
# Idempotent: packages already present are left alone.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config clang-format
  clang libclang-rt-14-dev libomp-dev llvm
  libopenblas-dev liblapack-dev liblapacke-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev zlib1g-dev
  libsvm-dev libtorch-dev libssl-dev liblbfgs-dev libxgboost-dev
  libboost-math-dev libopenmpi-dev openmpi-bin librdkit-dev
  python3 python3-numpy python3-matplotlib
  python3-dev python3-venv python3-pip
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all packages present"
fi
