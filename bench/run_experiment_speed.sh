#!/usr/bin/env bash
# Whole-process wall times of `dcalign experiment` for two builds, interleaved (A B A B ...), as
# a user runs them (no environment settings): the default experiment, Table 7's design with 10
# trials and a reduced paper 003 Fig. 2 sweep. Writes bench/results/experiments/speed.{json,md}.
#
# Usage: bench/run_experiment_speed.sh BASELINE_DCALIGN NEW_DCALIGN [REPS] [DATA_DIR]
#   BASELINE_DCALIGN, NEW_DCALIGN: the `dcalign` executables of the two builds.
#   REPS: runs of each per config (default 3). DATA_DIR: default ../shared/datasets.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?the baseline dcalign executable}
new=${2:?the new dcalign executable}
reps=${3:-3}
data=${4:-$(cd .. && pwd)/shared/datasets}
out=bench/results/experiments
mkdir -p "$out"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
configs=(experiments/default.toml bench/experiments/table7_layout_10trials.toml
         bench/experiments/fig2_reduced.toml)
rows=()
for cfg in "${configs[@]}"; do
  for r in $(seq 1 "$reps"); do
    for which in base new; do
      exe=$base
      [[ $which == new ]] && exe=$new
      /usr/bin/time -f "%e %M" -o "$scratch/time" "$exe" experiment "$cfg" --data-dir "$data" \
        --out "$scratch/$which" > "$scratch/$which.out" 2> "$scratch/$which.err" || {
        cat "$scratch/$which.err" >&2
        exit 1
      }
      read -r wall rss < "$scratch/time"
      echo "$(basename "$cfg" .toml) $which run $r: $wall s" >&2
      rows+=("{\"config\": \"$cfg\", \"build\": \"$which\", \"run\": $r, \"wall_seconds\": $wall, \"max_rss_kb\": $rss}")
    done
  done
done
{
  echo "{"
  echo "  \"machine\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) hardware threads\","
  echo "  \"baseline\": \"$("$base" --version | head -1)\", \"new\": \"$("$new" --version | head -1)\","
  echo "  \"command\": \"bench/run_experiment_speed.sh BASELINE NEW $reps\","
  echo "  \"runs\": ["
  for k in "${!rows[@]}"; do
    sep=,
    [[ $k -eq $((${#rows[@]} - 1)) ]] && sep=
    echo "    ${rows[$k]}$sep"
  done
  echo "  ]"
  echo "}"
} > "$out/speed.json"
python3 - "$out/speed.json" > "$out/speed.md" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
print(f"# dcalign experiment: whole-process wall time, baseline against new\n")
print(f"Machine: {d['machine']}. Runs interleaved, baseline first; medians of each; the ratio is"
      " the median of the per-pair ratios baseline / new.\n")
print("| config | baseline median (s) | new median (s) | speed-up |")
print("|---|---|---|---|")
cfgs = []
for r in d["runs"]:
    if r["config"] not in cfgs:
        cfgs.append(r["config"])
for c in cfgs:
    b = [r["wall_seconds"] for r in d["runs"] if r["config"] == c and r["build"] == "base"]
    n = [r["wall_seconds"] for r in d["runs"] if r["config"] == c and r["build"] == "new"]
    ratio = statistics.median([x / y for x, y in zip(b, n)])
    print(f"| `{c}` | {statistics.median(b):.2f} | {statistics.median(n):.2f} | {ratio:.2f}x |")
PY
cat "$out/speed.md"
