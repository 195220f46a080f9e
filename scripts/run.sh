#!/usr/bin/env bash
# Set-up, build and dcalign's main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh > build.log 2>&1 || { tail -50 build.log; exit 1; }
./build/src/cli/dcalign demo "$@"
