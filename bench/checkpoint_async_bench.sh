#!/usr/bin/env bash
# Background checkpoint saves (checkpoint.async) of a 124M Llama (1.95 GB of f32 weights and
# AdamW moments): how much the training steps that overlap a background write slow down, against
# the same steps of a run that saves nothing, and what the run's wall time and max RSS are with no
# save, synchronous saves and background saves. 21 steps, a checkpoint every 8 (steps 8 and 16;
# the last step's is written synchronously in both saving modes, as h2 train always does). The
# steps a background write overlapped come from the run's own log ("written in the background
# during steps A-B", or "during step A"); step times from the per-step metrics (log.every=1). Steps 2-8 are reported
# too: while they run, a low-priority thread maps and touches the memory of the first copy. ROUNDS rounds, the three
# modes alternating, each on a quiet machine (bench/quiet_machine.sh); medians over the rounds.
# Usage: bench/checkpoint_async_bench.sh [OUT_DIR] (default build/ckpt-async-bench; needs build/bin/h2)
#   env: ROUNDS (3), H2 (build/bin/h2), TRIES (4)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/ckpt-async-bench}
rounds=${ROUNDS:-3}
h2=${H2:-build/bin/h2}
tries=${TRIES:-4}
rm -rf "$out"
mkdir -p "$out"
: >"$out/load.txt"
source bench/quiet_machine.sh
source bench/train_shapes.sh
train_shape 124m  # h2_model

model=("${h2_model[@]}" --set train.steps=21 --set train.grad_accum=1 --set train.eval_every=0
  --set log.every=1)
for i in $(seq "$rounds"); do
  for mode in none sync async; do
    case $mode in
      none) save=(--set checkpoint.dir=) ;;
      sync) save=(--set checkpoint.dir="$out/ckpt" --set checkpoint.every=8 --set checkpoint.keep_last=1) ;;
      async) save=(--set checkpoint.dir="$out/ckpt" --set checkpoint.every=8 --set checkpoint.keep_last=1
        --set checkpoint.async=true) ;;
    esac
    rm -rf "$out/ckpt"
    quiet_run "$mode.$i" "$out/$mode.$i.log" "$out/$mode.$i.log" "$h2" train configs/train/tiny.yaml \
      "${model[@]}" "${save[@]}" --set log.metrics_file="$out/$mode.$i.jsonl"
  done
done
rm -rf "$out/ckpt"
python3 - "$out" "$rounds" <<'PY' | tee "$out/summary.md"
import json, re, statistics as st, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def step_ms(mode, i):
    return {r["step"]: r["step_ms"] for r in map(json.loads, open(f"{out}/{mode}.{i}.jsonl"))
            if r.get("event") == "step"}
def wall_rss(mode, i):
    e, _, _, m = open(f"{out}/{mode}.{i}.time").read().split()[:4]
    return float(e), int(m) / 1024
ratios, prep, rows = [], [], []
for i in range(1, rounds + 1):
    none, asy = step_ms("none", i), step_ms("async", i)
    log = open(f"{out}/async.{i}.log").read()
    steps = [s for a, b in re.findall(r"during steps? (\d+)(?:-(\d+))?", log)
             for s in range(int(a), int(b or a) + 1)]
    d = st.median(asy[s] for s in steps); n = st.median(none[s] for s in steps)
    ratios.append(d / n)
    p = st.median(asy[s] for s in range(2, 9)) / st.median(none[s] for s in range(2, 9))
    prep.append(p)
    rows.append((i, steps, d, n, p))
print("| round | steps overlapping a background write | their median step ms | same steps, no save | ratio | steps 2-8 (memory prepared meanwhile) vs no save |")
print("|---|---|---:|---:|---:|---:|")
for i, steps, d, n, p in rows:
    print(f"| {i} | {','.join(map(str, steps))} | {d:.0f} | {n:.0f} | {d / n:.3f} | {p:.3f} |")
print(f"\nmedian slowdown of the steps overlapping a write: {st.median(ratios):.3f}x; of steps 2-8: {st.median(prep):.3f}x\n")
print("| mode | wall s (median) | max RSS MiB (median) |")
print("|---|---:|---:|")
for mode in ("none", "sync", "async"):
    w = [wall_rss(mode, i) for i in range(1, rounds + 1)]
    print(f"| {mode} | {st.median(x[0] for x in w):.1f} | {st.median(x[1] for x in w):.0f} |")
PY
