#!/usr/bin/env bash
# Runs a family of experiment configs one after the other and then its figure script:
#   experiments/run_configs.sh FAMILY [PATTERN] [TRIALS]
# FAMILY is a folder of experiments/ holding FAMILY_*.toml configs and plot.py (dp_000,
# fedavg_002); results go to experiments/results/FAMILY/. PATTERN selects configs by a glob on
# the part of their names after FAMILY_ (default "*": all); TRIALS overrides their trial count
# (default: theirs). DCALIGN names the dcalign binary (default build/src/cli/dcalign).
set -euo pipefail
cd "$(dirname "$0")/.."
family=${1:?usage: experiments/run_configs.sh FAMILY [PATTERN] [TRIALS]}
pattern=${2:-*}
trials=${3:-}
bin=${DCALIGN:-build/src/cli/dcalign}
out=experiments/results/$family
mkdir -p "$out"
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-CooperLake}
for cfg in experiments/"$family"/"$family"_${pattern}.toml; do
  args=(experiment "$cfg" --out "$out")
  [[ -n $trials ]] && args+=(--trials "$trials")
  echo "== $cfg ($(date -u +%H:%M:%S))"
  "$bin" "${args[@]}" | tail -1
done
/usr/bin/python3 experiments/"$family"/plot.py "$out"
