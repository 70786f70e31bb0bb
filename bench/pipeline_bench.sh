#!/usr/bin/env bash
# Pipelines on an emulated mixed cluster: `h2 train configs/train/hetero-4.yaml` under
# `h2run -n 4` (ranks 0-1 on chip-a, ranks 2-3 on chip-b: virtual chips paced to their modelled
# speed), alternating variants, ROUNDS runs of each, then the medians
# (bench/pipeline_summary.py):
#   balanced   the config's hand-balanced plan: chip-a pair embedding + 3 blocks, chip-b pair
#              1 block + head (parallel.stage_layers=3,1)
#   uniform    the uniform split (parallel.stage_layers=2,2)
#   split-4-0  the other two-stage splits, for comparison: 4 blocks on chip-a (the chip-b pair
#   split-1-3  holds only the head), and 1 block on chip-a
#   equal      1F1B on four equal chips (4 x chip-a, one rank per stage, no FSDP; model dim 256,
#              ffn 688, 4 layers, grad_accum 8: p = 4, m = 8) for the measured bubble against
#              (p - 1) / (m + p - 1) = 27.3% and peak stashes against [4, 3, 2, 1]
#   equal-wide the same with dim 512, ffn 1376: the last stage's head is a smaller share of its
#              work, so the four stages are closer to equal
# and, once each after the rounds, the PACING variants again with H2_VCHIP_TIME_SCALE=0 (no
# pacing: the CPU's real time) and 2 (every modelled kernel time doubled), to show how much of
# each action's time the pacing decides. Every run writes OUT_DIR/NAME.ROUND.{log,time,jsonl,
# trace.json} (metrics every HETERO_EVERY / EQUAL_EVERY / WIDE_EVERY steps; the trace: the last 16
# steps). Runs start on a quiet machine and are repeated when other processes used over 5% of a
# core during them (bench/quiet_machine.sh's quiet_run, up to TRIES times; load.txt).
# Usage: bench/pipeline_bench.sh [OUT_DIR]   (default build/pipeline-bench)
#   env: ROUNDS (3), BUILD (build), H2 ($BUILD/bin/h2), H2RUN (h2run next to H2),
#        VARIANTS ("balanced uniform split-4-0 split-1-3 equal equal-wide"), PACING ("balanced";
#        "" skips), HETERO_STEPS (150), HETERO_EVERY (10), EQUAL_STEPS (30), EQUAL_EVERY (5),
#        WIDE_STEPS (10), WIDE_EVERY (2), TRIES (5),
#        QUIET (1; 0 skips waiting for a quiet machine but still logs disturbed runs)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/pipeline-bench}
rounds=${ROUNDS:-3}
build=${BUILD:-build}
h2=${H2:-$build/bin/h2}
h2run=${H2RUN:-$(dirname "$h2")/h2run}
read -ra variants <<<"${VARIANTS:-balanced uniform split-4-0 split-1-3 equal equal-wide}"
read -ra pacing <<<"${PACING-balanced}"
hetero_steps=${HETERO_STEPS:-150}
hetero_every=${HETERO_EVERY:-10}
equal_steps=${EQUAL_STEPS:-30}
equal_every=${EQUAL_EVERY:-5}
wide_steps=${WIDE_STEPS:-10}
wide_every=${WIDE_EVERY:-2}
tries=${TRIES:-5}
quiet=${QUIET:-1}
mkdir -p "$out"
: >"$out/load.txt"

source bench/quiet_machine.sh

# overrides VARIANT: prints the variant's --set overrides, one word a line.
overrides() {
  local hetero=(--set train.steps="$hetero_steps" --set log.every="$hetero_every")
  local equal=(--set "cluster.devices=vchip:chip-a,vchip:chip-a,vchip:chip-a,vchip:chip-a"
    --set parallel.stage_ranks= --set parallel.fsdp=false --set parallel.stage_layers=
    --set model.n_layers=4 --set train.grad_accum=8)
  case $1 in
    balanced) printf '%s\n' "${hetero[@]}" --set parallel.stage_layers=3,1 ;;
    uniform) printf '%s\n' "${hetero[@]}" --set parallel.stage_layers=2,2 ;;
    split-4-0) printf '%s\n' "${hetero[@]}" --set parallel.stage_layers=4,0 ;;
    split-1-3) printf '%s\n' "${hetero[@]}" --set parallel.stage_layers=1,3 ;;
    equal)
      printf '%s\n' --set train.steps="$equal_steps" --set log.every="$equal_every" \
        "${equal[@]}" --set model.dim=256 --set model.ffn_dim=688 ;;
    equal-wide)
      printf '%s\n' --set train.steps="$wide_steps" --set log.every="$wide_every" \
        "${equal[@]}" --set model.dim=512 --set model.ffn_dim=1376 ;;
    *) echo "unknown variant $1" >&2; exit 2 ;;
  esac
}

# run NAME VARIANT [ENV=VALUE...]: one training job; stdout+stderr into $out/NAME.log.
run() {
  local name=$1 variant=$2 sets
  shift 2
  mapfile -t sets < <(overrides "$variant")
  rm -f "$out/$name.jsonl" "$out/$name.trace.json"
  quiet_run "$name" "$out/$name.log" "$out/$name.log" env "$@" \
    "$h2run" -n 4 -- "$h2" train configs/train/hetero-4.yaml "${sets[@]}" \
    --set train.eval_every=0 --set checkpoint.dir= \
    --set log.metrics_file="$out/$name.jsonl" --set log.trace_file="$out/$name.trace.json"
}

for v in "${variants[@]}"; do overrides "$v" >/dev/null; done  # unknown names fail up front
for i in $(seq "$rounds"); do
  for v in "${variants[@]}"; do run "$v.$i" "$v"; done
done
for v in "${pacing[@]}"; do
  run "$v-ts0.1" "$v" H2_VCHIP_TIME_SCALE=0
  run "$v-ts2.1" "$v" H2_VCHIP_TIME_SCALE=2
done
python3 bench/pipeline_summary.py "$out" | tee "$out/summary.md"
echo "results in $out (load log: $out/load.txt; traces: $out/*.trace.json)"
