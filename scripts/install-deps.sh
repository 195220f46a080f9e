#!/usr/bin/env bash
# Installs every Debian package dcalign needs to build, test and benchmark: the list is
# scripts/deps.sh (the one list, which scripts/gpu-bundle.sh takes the GPU machine's libraries
# from). Idempotent: packages already present are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t PKGS < <(bash scripts/deps.sh install)

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
