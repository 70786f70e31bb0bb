#!/usr/bin/env bash
# Step time of low-precision training on the CPU (docs/performance.md, "Low-precision step time"):
# configs/train/numerics-256.yaml (dim 256, 4 blocks, 1,024 tokens per step) in FP32, in BF16, and
# with each recipe below on BF16 activations, alternating runs, ROUNDS of each, median step time
# over the steps after the warm-up (per-step metrics lines, log.every=1), then the median over runs,
# the fast-mode step, the least of the runs' 10th percentiles, and the paired ratio, the median over
# rounds of each round's ratio to bf16 (bench/lowp_summary.py). The FP8/FP4 GEMMs are emulated on
# the CPU (quantize, then decode tiles into an FP32 sgemm, or into exact bf16 GEMMs, one or one per
# K block, where the scales allow it: docs/numerics.md), so this measures what emulation costs, not
# what an FP8 tensor core gains. The peer, PyTorch at the same shape (bench/train_peer_torch.py,
# random tokens, FP32 and BF16 autocast, 2 threads), runs in the same rounds. Each run starts on a
# quiet machine (bench/quiet_machine.sh).
# Usage: bench/lowp_bench.sh [OUT_DIR]   (default build/lowp-bench)
#   env: ROUNDS (3), H2 (build/bin/h2), PY (.venv-bench/bin/python; empty: no peer), TRIES (10),
#        BASE (another h2 binary, e.g. a build of the previous commit: each run repeated with it
#        right after, reported as base_NAME),
#        STEPS (30 timed, after 5 warm-up), RUNS ("f32 bf16 fp8_blockwise fp8_current mxfp8 nvfp4
#        mxfp4"), MAX_ISA (native; avx2 or avx512: every run held to an older CPU's instruction
#        set on this one, bench/quiet_machine.sh's apply_max_isa; written to OUT_DIR/max_isa.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/lowp-bench}
rounds=${ROUNDS:-3}
h2=${H2:-build/bin/h2}
base=${BASE:-}
tries=${TRIES:-10}
py=${PY-.venv-bench/bin/python}
steps=${STEPS:-30}
warm=5
read -ra runs <<<"${RUNS:-f32 bf16 fp8_blockwise fp8_current mxfp8 nvfp4 mxfp4}"
mkdir -p "$out"
: >"$out/load.txt"
echo "$warm" >"$out/warmup"

source bench/quiet_machine.sh
apply_max_isa "${MAX_ISA:-native}" "$out"

for i in $(seq "$rounds"); do
  for name in "${runs[@]}"; do
    case $name in
      f32) sets=(--set train.dtype=f32) ;;
      bf16) sets=() ;;
      *) sets=(--set precision.recipe="$name") ;;
    esac
    for binary in "$h2" ${base:+"$base"}; do
      tag=$name
      [[ $binary == "$base" ]] && tag=base_$name
      quiet_run "$tag.$i" "$out/$tag.$i.log" "$out/$tag.$i.log" "$binary" train \
        configs/train/numerics-256.yaml "${sets[@]}" --set train.steps=$((warm + steps)) \
        --set train.eval_every=0 --set log.every=1 --set log.metrics_file="$out/$tag.$i.jsonl"
    done
  done
  if [[ -n $py ]]; then
    peer=("$py" bench/train_peer_torch.py --vocab-size 256 --dim 256 --n-layers 4 --n-heads 4
      --ffn-dim 688 --seq-len 128 --batch-size 8 --warmup "$warm" --steps "$steps" --threads 2)
    quiet_run "torch_f32.$i" "$out/torch_f32.$i.log" "$out/torch_f32.$i.log" "${peer[@]}"
    quiet_run "torch_bf16.$i" "$out/torch_bf16.$i.log" "$out/torch_bf16.$i.log" "${peer[@]}" \
      --autocast-bf16
  fi
done
names=("${runs[@]}")
[[ -n $base ]] && names+=("${runs[@]/#/base_}")
python3 bench/lowp_summary.py "$out" "${names[@]}" | tee "$out/summary.md"
echo "results in $out (load log: $out/load.txt)"
