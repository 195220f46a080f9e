#!/usr/bin/env bash
# Set-up, build and dcalign's main job: a small Data Collaboration experiment on MNIST (on an
# announced synthetic dataset when the MNIST files are not found), printing its table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh > build.log 2>&1 || { tail -50 build.log; exit 1; }
data_dir="${DCALIGN_DATA:-$(cd .. && pwd)/shared/datasets}"
config=experiments/default.toml
if [[ ! -f "$data_dir/mnist/train-images-idx3-ubyte.gz" ]]; then
  echo "run.sh: MNIST not found under $data_dir; running the SYNTHETIC stand-in instead" >&2
  config=experiments/default_synthetic.toml
fi
./build/src/cli/dcalign experiment "$config" --data-dir "$data_dir" --out build/results "$@"
