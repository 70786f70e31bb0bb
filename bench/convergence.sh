#!/usr/bin/env bash
# Low-precision convergence study (docs/numerics.md): configs/train/numerics-256.yaml trained for
# its 2,000 steps in BF16 and with each recipe below, same data, seed and steps; then the table
# and the loss-curve plot (bench/convergence_plot.py). Each run writes OUT/NAME/metrics.jsonl and
# OUT/NAME.log. The runs are long (minutes each on 2 cores); they are not timed assertions.
# Usage: bench/convergence.sh [OUT_DIR]   (default runs/numerics)
#   env: H2 (build/bin/h2), RUNS (all of: bf16 fp8_blockwise mxfp8 nvfp4 mxfp4; also known:
#        fp8_current fp8_delayed nvfp4_no_switch mxfp4_no_switch mxfp8_ceil mxfp4_ceil),
#        STEPS (2000),
#        PLOT (docs/numerics-loss.png; empty: no plot), PYTHON (/usr/bin/python3, which has
#        Debian's python3-matplotlib), SEED (the config's 1337; another seed changes the
#        initial weights, the batches and the stochastic rounding's draws)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/numerics}
h2=${H2:-build/bin/h2}
steps=${STEPS:-2000}
read -ra runs <<<"${RUNS:-bf16 fp8_blockwise mxfp8 nvfp4 mxfp4}"
plot=${PLOT-docs/numerics-loss.png}
config=configs/train/numerics-256.yaml
mkdir -p "$out"

# The FP4 recipes switch every block linear to BF16 for the last 20% of the steps (the FP4
# pretraining recipe's target precision); the FP8 recipes run low precision throughout.
recipe_sets() {
  case $1 in
    bf16) ;;
    fp8_blockwise | mxfp8 | fp8_current | fp8_delayed) echo "--set precision.recipe=$1" ;;
    nvfp4 | mxfp4)
      echo "--set precision.recipe=$1 --set precision.target_after=0.8"
      echo "--set precision.target_recipe=bf16" ;;
    nvfp4_no_switch | mxfp4_no_switch) echo "--set precision.recipe=${1%_no_switch}" ;;
    # The MX recipes with the ceil scale rule instead of OCP's floor (no saturated elements).
    mxfp8_ceil | mxfp4_ceil)
      recipe_sets "${1%_ceil}"
      echo "--set precision.mx_scale=ceil" ;;
    *) echo "convergence.sh: unknown run '$1'" >&2; exit 2 ;;
  esac
}

for name in "${runs[@]}"; do
  read -ra sets <<<"$(recipe_sets "$name" | tr '\n' ' ')"
  if [[ -n ${SEED:-} ]]; then sets+=(--set train.seed="$SEED"); fi
  echo "== $name: $h2 train $config ${sets[*]}"
  "$h2" train "$config" "${sets[@]}" --set train.steps="$steps" \
    --set log.metrics_file="$out/$name/metrics.jsonl" 2>&1 | tee "$out/$name.log"
done

plot_args=()
[[ -n $plot ]] && plot_args=(--png "$plot")
"${PYTHON:-/usr/bin/python3}" bench/convergence_plot.py "$out" "${plot_args[@]}" --runs "${runs[@]}"
