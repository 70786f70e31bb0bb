#!/usr/bin/env bash
# H2's bf16 training step against its own f32 step (issue 18: within 1.1x where the CPU has no
# bf16 instructions): the tiny shape of bench/train_shapes.sh, f32 and bf16 runs alternating,
# ROUNDS of each, each run's median step time over the steps after the warm-up (per-step metrics
# lines), then per round the ratio bf16 / f32 of the two runs made seconds apart, and the median
# of those ratios (this machine's speed drifts between states for minutes at a time; a pair sees
# one). Each run starts on a quiet machine (bench/quiet_machine.sh).
# Usage: bench/dtype_pair_bench.sh [OUT_DIR]   (default build/dtype-pair)
#   env: ROUNDS (6), H2 (build/bin/h2), TRIES (10), STEPS (40 timed, after 5 warm-up),
#        MAX_ISA (native; avx2 or avx512: H2 and OpenBLAS held to an older CPU's instruction set,
#        bench/quiet_machine.sh's apply_max_isa; written to OUT_DIR/max_isa.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/dtype-pair}
rounds=${ROUNDS:-6}
h2=${H2:-build/bin/h2}
tries=${TRIES:-10}
steps=${STEPS:-40}
mkdir -p "$out"
: >"$out/load.txt"
source bench/quiet_machine.sh
source bench/train_shapes.sh
apply_max_isa "${MAX_ISA:-native}" "$out"
train_shape tiny  # warm, h2_model

for i in $(seq "$rounds"); do
  for dtype in f32 bf16; do
    quiet_run "$dtype.$i" "$out/$dtype.$i.log" "$out/$dtype.$i.log" "$h2" train \
      configs/train/tiny.yaml "${h2_model[@]}" --set train.steps=$((warm + steps)) \
      --set train.grad_accum=1 --set train.eval_every=0 --set checkpoint.dir= --set log.every=1 \
      --set train.dtype="$dtype" --set log.metrics_file="$out/$dtype.$i.jsonl"
  done
done
python3 - "$out" "$rounds" "$warm" <<'PY' | tee "$out/summary.md"
import json, statistics, sys
out, rounds, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def step_ms(path):
    steps = [json.loads(x) for x in open(path) if x.strip()]
    return statistics.median(s["step_ms"] for s in steps
                             if s.get("event") == "step" and s["step"] > warm)
f32 = [step_ms(f"{out}/f32.{i}.jsonl") for i in range(1, rounds + 1)]
bf16 = [step_ms(f"{out}/bf16.{i}.jsonl") for i in range(1, rounds + 1)]
pairs = [b / f for f, b in zip(f32, bf16)]
print("| | step ms per round | median |")
print("|---|---|---:|")
print(f"| f32 | {', '.join(f'{x:.1f}' for x in f32)} | {statistics.median(f32):.2f} |")
print(f"| bf16 | {', '.join(f'{x:.1f}' for x in bf16)} | {statistics.median(bf16):.2f} |")
print(f"| bf16 / f32, paired | {', '.join(f'{x:.3f}' for x in pairs)} | "
      f"**{statistics.median(pairs):.3f}x** |")
PY
echo "results in $out (load log: $out/load.txt)"
