#!/usr/bin/env bash
# HeteroAuto against measurement (docs/performance.md, "Planner"): on the emulated clusters
# mixed-4 and mixed-8, profile each chip type, search, then train every one of the search's top
# plans, the even split of the chosen plan's stages and (mixed-8) each homogeneous part's own
# best plan, and compare predicted with measured step time and peak memory per rank. Prints MAPE,
# worst error, Kendall's tau of the ranking, memory error, the chosen plan against the best of
# its top 10 measured and against the even split, the mixed cluster against the sum of its parts,
# and how long planning takes for 8 chips and for 1,024 / 4,096 data-sheet chips. Every run is
# also simulated (h2 simulate), for the cluster simulator's error against measurement
# (docs/scale.md); mixed-8-slow is mixed-8 with its inter-node and cross-type links 4x slower.
# Usage: bench/planner_bench.sh [OUT_DIR]   (default runs/planner-bench)
#   env: H2_BIN (build/bin), TOP (10: the search's best plans measured per cluster, then its
#        numbers 20, 50, 100 and 200), STEPS (6), LOG_EVERY (3; the last logged interval's mean
#        step time is the measured one), CLUSTERS ("mixed-4 mixed-8 mixed-8-slow")
# Runs take ~40 minutes on 2 cores (TOP=5: ~25); run it on a quiet machine (bench/quiet_machine.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/planner-bench}
mkdir -p "$out"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
exec python3 bench/planner_bench.py --out "$out" --bin "${H2_BIN:-build/bin}" \
  --top "${TOP:-10}" --steps "${STEPS:-6}" --log-every "${LOG_EVERY:-3}" \
  --clusters ${CLUSTERS:-mixed-4 mixed-8 mixed-8-slow}
