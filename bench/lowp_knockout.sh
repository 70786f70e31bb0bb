#!/usr/bin/env bash
# What each operand's quantization costs a low-precision training step (docs/performance.md,
# "Low-precision step time", stop 39): configs/train/numerics-256.yaml in BF16 and with each
# recipe, the recipe once as it is and then with the quantizations of one operand pair knocked
# out (x and x^T, dy and dy^T, W and W^T, or all six): bench/lowp_knockout.patch makes a Linear
# quantize the operands named in H2_KNOCKOUT on their first call and reuse those codes after, so
# the GEMMs and every other kernel run as before and the step shows what the skipped work cost.
# That is the ceiling of anything that makes those quantizations cheaper (fusing them into the
# producer, both orientations in one pass). The losses are wrong after the first step: a
# measurement, never a training run. Alternating runs, ROUNDS of each, each on a quiet machine
# (bench/quiet_machine.sh); the table is bench/lowp_summary.py's (median, fast-mode and paired
# ratios to bf16).
# Usage: bench/lowp_knockout.sh [OUT_DIR]   (default build/lowp-knockout)
#   env: ROUNDS (6), RECIPES ("fp8_blockwise nvfp4"), STEPS (30 timed, after 5 warm-up),
#        TRIES (10), H2 (an h2 built with the patch; default: built here in build/knockout from
#        a worktree of HEAD with the patch applied, reused on later runs)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/lowp-knockout}
rounds=${ROUNDS:-6}
tries=${TRIES:-10}
steps=${STEPS:-30}
warm=5
read -ra recipes <<<"${RECIPES:-fp8_blockwise nvfp4}"
h2=${H2:-}
if [[ -z $h2 ]]; then
  src=build/knockout/src
  if [[ ! -d $src ]]; then
    git worktree add --detach "$src" HEAD
    git -C "$src" apply "$PWD/bench/lowp_knockout.patch"
  fi
  cmake -S "$src" -B build/knockout/build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DH2_BUILD_TESTS=OFF >/dev/null
  ninja -C build/knockout/build h2
  h2=build/knockout/build/bin/h2
fi
mkdir -p "$out"
: >"$out/load.txt"
echo "$warm" >"$out/warmup"

source bench/quiet_machine.sh

# Run RECIPE-ko-K reuses the operands knockouts[K] (H2_KNOCKOUT's names).
declare -A knockouts=([x]="x,xt" [dy]="dy,dyt" [w]="w,wt" [all]="x,xt,dy,dyt,w,wt")
names=(bf16)
for recipe in "${recipes[@]}"; do
  names+=("$recipe")
  for ko in x dy w all; do names+=("$recipe-ko-$ko"); done
done
for i in $(seq "$rounds"); do
  for name in "${names[@]}"; do
    recipe=${name%%-ko-*}
    sets=()
    [[ $recipe != bf16 ]] && sets=(--set precision.recipe="$recipe")
    knockout=
    [[ $name == *-ko-* ]] && knockout=${knockouts[${name##*-ko-}]}
    quiet_run "$name.$i" "$out/$name.$i.log" "$out/$name.$i.log" env H2_KNOCKOUT="$knockout" \
      "$h2" train configs/train/numerics-256.yaml "${sets[@]}" \
      --set train.steps=$((warm + steps)) --set train.eval_every=0 --set log.every=1 \
      --set log.metrics_file="$out/$name.$i.jsonl"
  done
done
python3 bench/lowp_summary.py "$out" "${names[@]}" | tee "$out/summary.md"
echo "results in $out (load log: $out/load.txt)"
