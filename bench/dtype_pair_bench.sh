#!/usr/bin/env bash
# H2's bf16 training step against its own f32 step (issue 18: within 1.1x where the CPU has no
# bf16 instructions): the tiny shape of bench/train_shapes.sh, f32 and bf16 runs alternating,
# ROUNDS of each, each run's median step time over the steps after the warm-up (per-step metrics
# lines), then per round the ratio bf16 / f32 of the two runs made seconds apart, and the median
# of those ratios (this machine's speed drifts between states for minutes at a time; a pair sees
# one), and the machine at full speed: the 10th and 25th percentiles of every timed step of each
# dtype over all rounds, and their ratios (robust where the state changes inside a run, as pairs
# are not); and the paired ratios of the rounds whose runs all saw one core-link state
# (bench/core_link.py). Each run starts on a quiet machine (bench/quiet_machine.sh).
# Usage: bench/dtype_pair_bench.sh [OUT_DIR]   (default build/dtype-pair)
#   env: ROUNDS (6), H2 (build/bin/h2), TRIES (10), STEPS (40 timed, after 5 warm-up),
#        MAX_ISA (native; avx2 or avx512: H2 and OpenBLAS held to an older CPU's instruction set,
#        bench/quiet_machine.sh's apply_max_isa; written to OUT_DIR/max_isa.txt),
#        BASE (another h2 binary, e.g. a build of the previous commit: each round runs its f32
#        and bf16 steps too, right after this build's, and the summary adds its paired ratio and
#        this build's bf16 step over its)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/dtype-pair}
rounds=${ROUNDS:-6}
h2=${H2:-build/bin/h2}
tries=${TRIES:-10}
steps=${STEPS:-40}
base=${BASE:-}
mkdir -p "$out"
: >"$out/load.txt"
source bench/quiet_machine.sh
source bench/train_shapes.sh
apply_max_isa "${MAX_ISA:-native}" "$out"
train_shape tiny  # warm, h2_model

# run NAME BINARY DTYPE I: one timed training run, its per-step metrics in $out/NAME.I.jsonl.
run() {
  quiet_run "$1.$4" "$out/$1.$4.log" "$out/$1.$4.log" "$2" train \
    configs/train/tiny.yaml "${h2_model[@]}" --set train.steps=$((warm + steps)) "${h2_timed[@]}" \
    --set train.dtype="$3" --set log.metrics_file="$out/$1.$4.jsonl"
}
for i in $(seq "$rounds"); do
  for dtype in f32 bf16; do run "$dtype" "$h2" "$dtype" "$i"; done
  if [[ -n $base ]]; then
    for dtype in f32 bf16; do run "base-$dtype" "$base" "$dtype" "$i"; done
  fi
done
python3 - "$out" "$rounds" "$warm" "$base" <<'PY' | tee "$out/summary.md"
import json, statistics, sys
sys.path.insert(0, "bench")
from core_link import link_state
out, rounds, warm, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def timed_steps(path):
    steps = [json.loads(x) for x in open(path) if x.strip()]
    return [s["step_ms"] for s in steps if s.get("event") == "step" and s["step"] > warm]
def step_ms(path):
    return statistics.median(timed_steps(path))
def per_round(name):
    return [step_ms(f"{out}/{name}.{i}.jsonl") for i in range(1, rounds + 1)]
def percentile(name, p):
    steps = sorted(x for i in range(1, rounds + 1) for x in timed_steps(f"{out}/{name}.{i}.jsonl"))
    return steps[int(p * (len(steps) - 1))]
def row(label, values, digits=1, bold=False):
    median = f"{statistics.median(values):.{max(digits, 2)}f}"
    print(f"| {label} | {', '.join(f'{x:.{digits}f}' for x in values)} | "
          f"{f'**{median}x**' if bold else median} |")
f32, bf16 = per_round("f32"), per_round("bf16")
print("| | step ms per round | median |")
print("|---|---|---:|")
row("f32", f32)
row("bf16", bf16)
row("bf16 / f32, paired", [b / f for f, b in zip(f32, bf16)], 3, True)
if base:
    base_f32, base_bf16 = per_round("base-f32"), per_round("base-bf16")
    row(f"base f32 ({base})", base_f32)
    row("base bf16", base_bf16)
    row("base bf16 / f32, paired", [b / f for f, b in zip(base_f32, base_bf16)], 3, True)
    row("bf16 / base bf16", [b / a for a, b in zip(base_bf16, bf16)], 3)
names = ["f32", "bf16"] + (["base-f32", "base-bf16"] if base else [])
def round_state(i):
    states = {link_state(f"{out}/{name}.{i}.link") for name in names}
    return states.pop() if len(states) == 1 else "changed"
states = [round_state(i) for i in range(1, rounds + 1)]
print()
print("| core link of the round's runs | rounds | bf16 / f32, paired (median)"
      + (" | base's |" if base else " |"))
print("|---|---:|---:" + ("|---:|" if base else "|"))
for state in ("close", "distant", "changed"):
    picked = [i for i, s in enumerate(states) if s == state]
    if not picked:
        continue
    mine = statistics.median(bf16[i] / f32[i] for i in picked)
    theirs = (f" {statistics.median(base_bf16[i] / base_f32[i] for i in picked):.3f}x |"
              if base else "")
    print(f"| {state} | {len(picked)} | **{mine:.3f}x** |{theirs}")
print()
print("| full speed: percentile of every timed step | f32 ms | bf16 ms | bf16 / f32 |")
print("|---|---:|---:|---:|")
for label, prefix in [("", "")] + ([(" (base)", "base-")] if base else []):
    for p in (0.10, 0.25):
        f, b = percentile(prefix + "f32", p), percentile(prefix + "bf16", p)
        print(f"| {int(p * 100)}th{label} | {f:.2f} | {b:.2f} | **{b / f:.3f}x** |")
PY
echo "results in $out (load log: $out/load.txt)"
