#!/usr/bin/env bash
# Training throughput: `h2 train` against its PyTorch peer (bench/train_peer_torch.py, same
# architecture and shapes, f32, 2 threads), eager and torch.compile'd, alternating runs, ROUNDS of each per shape, then the
# medians (bench/train_summary.py). Shapes (bench/train_shapes.sh):
#   tiny: vocab 256, dim 128, 4 layers, 4 heads, ffn 344, seq 128, batch 8, tied head
#   124m: vocab 50257, dim 768, 12 layers, 12 heads, ffn 2048, seq 256, batch 2, untied head
#         (162.1M parameters with the separate 50257 x 768 head; 123.6M without it)
# Throughput is tokens per step / median step time over the steps after the warm-up (H2: the
# per-step metrics lines, log.every=1; the peer times each step itself); peak memory is the
# process's max RSS (/usr/bin/time -f %M) for both. Each run starts on a quiet machine and is
# repeated when other processes used over 5% of a core during it (as bench/run_all.sh).
# Usage: bench/train_bench.sh [OUT_DIR]   (default build/train-bench)
#   env: ROUNDS (3), H2 (build/bin/h2), PY (.venv-bench/bin/python), THREADS (2), TRIES (10),
#        SHAPES ("tiny 124m"), TINY_STEPS (40 timed, after 5 warm-up), BIG_STEPS (4, after 2),
#        DTYPE (f32; bf16: H2 trains in bf16, the peer under torch.autocast(cpu, bfloat16)),
#        COMPILE (1: also the torch.compile'd peer; 0: eager only),
#        MAX_ISA (native; avx2 or avx512: both sides held to an older CPU's instruction set on
#        this one, bench/quiet_machine.sh's apply_max_isa; written to OUT_DIR/max_isa.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/train-bench}
rounds=${ROUNDS:-3}
h2=${H2:-build/bin/h2}
py=${PY:-.venv-bench/bin/python}
threads=${THREADS:-2}
tries=${TRIES:-10}
read -ra shapes <<<"${SHAPES:-tiny 124m}"
tiny_steps=${TINY_STEPS:-40}
big_steps=${BIG_STEPS:-4}
dtype=${DTYPE:-f32}
compile=${COMPILE:-1}
case $dtype in
  f32) h2_dtype=() peer_dtype=() ;;
  bf16) h2_dtype=(--set train.dtype=bf16) peer_dtype=(--autocast-bf16) ;;
  *) echo "DTYPE must be f32 or bf16, not '$dtype'" >&2; exit 2 ;;
esac
mkdir -p "$out"
: >"$out/load.txt"
# torch.compile's kernels cached by one MAX_ISA crashed later runs under another ("free():
# invalid pointer", PyTorch 2.15): each benchmark compiles into a cache of its own.
export TORCHINDUCTOR_CACHE_DIR="$(cd "$out" && pwd)/inductor-cache"
rm -rf "$TORCHINDUCTOR_CACHE_DIR"
source bench/quiet_machine.sh
source bench/train_shapes.sh
apply_max_isa "${MAX_ISA:-native}" "$out"

# run NAME CMD...: stdout+stderr into $out/NAME.log, "%e %U %S %M" into $out/NAME.time.
run() {
  quiet_run "$1" "$out/$1.log" "$out/$1.log" "${@:2}"
}

for shape in "${shapes[@]}"; do
  train_shape "$shape"
  steps=$tiny_steps
  [[ $shape == 124m ]] && steps=$big_steps
  for i in $(seq "$rounds"); do
    # H2: text data (byte ids < 256 are valid for any vocab >= 256), no eval, no checkpoints.
    run "h2.$shape.$i" "$h2" train configs/train/tiny.yaml "${h2_model[@]}" "${h2_dtype[@]}" \
      --set train.steps=$((warm + steps)) "${h2_timed[@]}" \
      --set log.metrics_file="$out/h2.$shape.$i.jsonl"
    run "torch.$shape.$i" "$py" bench/train_peer_torch.py "${peer_model[@]}" "${peer_dtype[@]}" \
      --warmup "$warm" --steps "$steps" --threads "$threads"
    # torch.compile compiles during the first warm-up steps: two more of them.
    ((compile)) && run "torchc.$shape.$i" "$py" bench/train_peer_torch.py "${peer_model[@]}" \
      "${peer_dtype[@]}" --compile --warmup "$((warm + 2))" --steps "$steps" --threads "$threads"
  done
  echo "$warm" >"$out/$shape.warmup"
done
python3 bench/train_summary.py "$out" "${shapes[@]}" | tee "$out/summary.md"
echo "results in $out (load log: $out/load.txt)"
