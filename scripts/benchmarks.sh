#!/usr/bin/env bash
# Every benchmark behind the README's results section, one after another, on the embedded tiny
# default (CPU). Each writes NAME.json + PNG figures under results/ and a log under results/logs/.
#   bash scripts/benchmarks.sh              # all of them (about 40 min on 2 cores)
#   bash scripts/benchmarks.sh memory links # only these
# Run them on an otherwise idle machine: the JSONs record the load average at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p results/logs

declare -A COMMANDS=(
  [memory]="zerolock bench memory --out results/memory"
  [efficiency]="zerolock bench efficiency --out results/efficiency --repeats 2"
  [simulator]="zerolock bench simulator --out results/simulator"
  [throughput]="zerolock bench throughput --out results/throughput --repeats 2"
  [links]="zerolock bench links --out results/links"
  [geometry]="zerolock bench geometry --out results/geometry"
  [geometry-fixed-m]="zerolock bench geometry --microbatches 4 --out results/geometry-fixed-m"
  [envelope]="zerolock bench envelope --out results/envelope"
  [quality]="zerolock bench quality --out results/quality"
  [readout]="zerolock bench readout --out results/readout"
  [crosscheck]="zerolock bench crosscheck --out results/crosscheck --repeats 2"
  [recovery]="zerolock bench recovery --out results/recovery --repeats 2"
  [dashboard]="python -m app.bench_dashboard --repeats 2"
  [dashboard-poll3]="python -m app.bench_dashboard --repeats 2 --poll 3"
)
ORDER=(memory efficiency simulator throughput links geometry geometry-fixed-m envelope quality readout
       crosscheck recovery dashboard dashboard-poll3)

names=("$@")
[ ${#names[@]} -eq 0 ] && names=("${ORDER[@]}")
for name in "${names[@]}"; do
  if [ -z "${COMMANDS[$name]:-}" ]; then
    echo "unknown benchmark '$name'; one of: ${ORDER[*]}" >&2
    exit 2
  fi
done
for name in "${names[@]}"; do
  echo "== $name: ${COMMANDS[$name]}"
  start=$(date +%s)
  ${COMMANDS[$name]} > "results/logs/$name.log" 2>&1 || { echo "   FAILED, see results/logs/$name.log"; continue; }
  tail -n 2 "results/logs/$name.log" | sed 's/^/   /'
  echo "   $(( $(date +%s) - start )) s"
done
