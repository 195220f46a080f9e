#!/bin/bash
# RDP's penalty weight: paper 004 prints none, so dcalign's default (AlignOptions::rdp_eta, relative
# to the anchors' energy per user) is chosen here on held-apart data: the Pima and Heart disease
# (duplication emulated, the paper's layout) logistic-regression configs of Tables 1 and 5, with
# another seed (7; the tables use 2026), 30 trials each, rdp-ls and rdp-opp only, over the grid
# below. Writes experiments/results/tuning/*.{json,csv,md} and the summary rdp_eta.md.
#
#   experiments/tuning/tune_rdp_eta.sh [path/to/dcalign]
set -euo pipefail
cd "$(dirname "$0")/../.."
DCALIGN=${1:-build/src/cli/dcalign}
OUT=experiments/results/tuning
GRID=(1e-4 1e-3 1e-2 1e-1 1)
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for base in pima_004_table1 heart_004_table5_duplicated; do
  for eta in "${GRID[@]}"; do
    name="tune_${base}_eta${eta}"
    {
      grep -Ev '^(name|methods|seed|trials) *=' "experiments/$base.toml"
      echo "name = \"$name\""
      echo 'methods = ["rdp-ls", "rdp-opp"]'
      echo "seed = 7"
      echo "trials = 30"
      echo "rdp_eta = $eta"
    } > "$tmp/$name.toml"
    "$DCALIGN" experiment "$tmp/$name.toml" --out "$OUT" > /dev/null
  done
done
python3 experiments/tuning/summarize_rdp_eta.py "$OUT" "${GRID[@]}" > "$OUT/rdp_eta.md"
cat "$OUT/rdp_eta.md"
