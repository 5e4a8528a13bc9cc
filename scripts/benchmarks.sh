#!/usr/bin/env bash
# Every benchmark behind docs/results.md, one after another (see docs/benchmarks.md). Each writes
# NAME.json + PNG figures under results/ and a log under results/logs/.
#   bash scripts/benchmarks.sh              # the default set: the embedded tiny model, CPU (about 40 min on 2 cores)
#   bash scripts/benchmarks.sh memory links # only these, by name (any name below)
# Run them on an otherwise idle machine: the JSONs record the load average at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p results/logs

# the paper's four methods: the committed results of these benchmarks hold them; zero-bubble (zb-h1) is
# compared by `bench schedulers`, which the script runs too
PAPER_METHODS="--methods gpipe,1f1b,pipedream,zerolock"
declare -A COMMANDS=(
  [memory]="zerolock bench memory $PAPER_METHODS --out results/memory"
  [efficiency]="zerolock bench efficiency $PAPER_METHODS --out results/efficiency --repeats 2"
  [simulator]="zerolock bench simulator $PAPER_METHODS --out results/simulator"
  [throughput]="zerolock bench throughput $PAPER_METHODS --out results/throughput --repeats 2"
  [links]="zerolock bench links $PAPER_METHODS --out results/links"
  [geometry]="zerolock bench geometry $PAPER_METHODS --out results/geometry"
  [geometry-fixed-m]="zerolock bench geometry $PAPER_METHODS --microbatches 4 --out results/geometry-fixed-m"
  [envelope]="zerolock bench envelope $PAPER_METHODS --out results/envelope"
  [schedulers]="zerolock bench schedulers --repeats 4 --out results/schedulers"
  [quality]="zerolock bench quality --out results/quality"
  [readout]="zerolock bench readout --out results/readout"
  [crosscheck]="zerolock bench crosscheck --out results/crosscheck --repeats 4"
  [recovery]="zerolock bench recovery --out results/recovery --repeats 2"
  [dashboard]="zerolock bench dashboard --repeats 2 --out results/dashboard"
  [faults]="zerolock bench faults --cases matrix --out results/faults-matrix"
  [quality-tiny-1000-k3]="zerolock bench quality --stages 3 --steps 1000 --eval-every 100 --seeds 0 --eval-size 256 --reference-threads 1 --arms 'bp,zerolock a=0.5 reverse' --out results/quality-tiny-1000-k3"
  [quality-tiny-1000-k2]="zerolock bench quality --stages 2 --steps 1000 --eval-every 100 --seeds 0 --eval-size 256 --reference-threads 1 --arms 'zerolock a=0.5 reverse' --out results/quality-tiny-1000-k2"
  [quality-tiny-adapters]="zerolock bench quality --stages 3 --steps 200 --eval-every 50 --seeds 0 --eval-size 256 --reference-threads 1 --arms 'zerolock a=0.5 reverse,zerolock a=0.5 mlp adapter,zerolock a=0.5 affine adapter,zerolock a=1 affine adapter,zerolock a=0.5->1' --out results/quality-tiny-adapters"
  [readability-tiny]="zerolock bench readability --steps 200 --lr 5e-3 --eval-size 256 --translator-steps 150 --reference-threads 1 --out results/readability-tiny"
  # the real model: bash scripts/setup.sh --real first
  [stage-rss-smollm2]="zerolock bench stage-rss --model smollm2-135m --out results/stage-rss-smollm2"
  [readability-smollm2]="zerolock bench readability --model smollm2-135m --steps 20 --lr 5e-4 --eval-size 128 --translator-steps 100 --translator-examples 192 --reference-threads 1 --top --out results/readability-smollm2"
  [quality-smollm2]="zerolock bench quality --model smollm2-135m --stages 3 --steps 30 --eval-every 10 --seeds 0 --eval-size 128 --lr 5e-4 --reference-threads 1 --arms 'bp,zerolock a=1,zerolock a=0.5 reverse,zerolock a=0.5 mlp adapter,zerolock a=0.5->1' --out results/quality-smollm2"
  [quality-smollm2-affine]="zerolock bench quality --model smollm2-135m --stages 3 --steps 30 --eval-every 10 --seeds 0 --eval-size 128 --lr 5e-4 --reference-threads 1 --arms 'zerolock a=0.5 affine adapter,zerolock a=1 affine adapter' --out results/quality-smollm2-affine"
  [quality-smollm2-k2]="zerolock bench quality --model smollm2-135m --stages 2 --steps 30 --eval-every 10 --seeds 0 --eval-size 128 --lr 5e-4 --reference-threads 1 --arms 'zerolock a=1,zerolock a=1 affine adapter' --out results/quality-smollm2-k2"
  [quality-smollm2-forward]="zerolock bench quality --model smollm2-135m --stages 3 --steps 30 --eval-every 10 --seeds 0 --eval-size 128 --lr 5e-4 --reference-threads 1 --arms 'zerolock a=0.5 forward' --out results/quality-smollm2-forward"
  [quality-smollm2-seed1]="zerolock bench quality --model smollm2-135m --stages 3 --steps 30 --eval-every 10 --seeds 1 --eval-size 128 --lr 5e-4 --reference-threads 1 --arms 'bp,zerolock a=1,zerolock a=1 affine adapter' --out results/quality-smollm2-seed1"
  [quality-smollm2-late]="zerolock bench quality --model smollm2-135m --stages 3 --boundaries 20,25 --steps 30 --eval-every 10 --seeds 0 --eval-size 128 --lr 5e-4 --reference-threads 1 --arms 'zerolock a=1' --out results/quality-smollm2-late"
  [quality-smollm2-qkvo]="zerolock bench quality --model smollm2-135m --stages 3 --lora-targets q_proj,k_proj,v_proj,o_proj --steps 30 --eval-every 10 --seeds 0 --eval-size 128 --lr 5e-4 --reference-threads 1 --arms 'bp,zerolock a=1' --out results/quality-smollm2-qkvo"
  [schedulers-smollm2]="zerolock bench schedulers --model smollm2-135m --steps 6 --repeats 2 --out results/schedulers-smollm2"
  [quality-smollm2-1f1b]="zerolock bench quality --model smollm2-135m --stages 3 --steps 30 --seeds 0 --eval-size 128 --lr 5e-4 --threads 1 --arms 1f1b --out results/quality-smollm2-1f1b"
)
# the default set (the tiny model; about 40 min on 2 cores). The fault matrix (36 min), the long tiny
# runs and the real-model ones are named only: bash scripts/benchmarks.sh quality-smollm2 ...
ORDER=(memory efficiency simulator throughput links geometry geometry-fixed-m envelope schedulers quality readout
       crosscheck recovery dashboard readability-tiny quality-tiny-adapters)

names=("$@")
[ ${#names[@]} -eq 0 ] && names=("${ORDER[@]}")
for name in "${names[@]}"; do
  if [ -z "${COMMANDS[$name]:-}" ]; then
    echo "unknown benchmark '$name'; one of: ${!COMMANDS[*]}" >&2
    exit 2
  fi
done
for name in "${names[@]}"; do
  echo "== $name: ${COMMANDS[$name]}"
  start=$(date +%s)
  eval "${COMMANDS[$name]}" > "results/logs/$name.log" 2>&1 || { echo "   FAILED, see results/logs/$name.log"; continue; }
  tail -n 2 "results/logs/$name.log" | sed 's/^/   /'
  echo "   $(( $(date +%s) - start )) s"
done
