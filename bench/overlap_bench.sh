#!/usr/bin/env bash
# Slow links hidden behind compute (docs/performance.md, "Overlap"): a 4-stage pipeline on the
# emulated cluster of bench/overlap/cluster.yaml, whose cross-type link takes about half a
# stage's forward-and-backward per micro-batch, trained with 1F1B at lead 0 (the plain order: a
# round trip over the slow link on every micro-batch's critical path), lead 1 and lead 2 (each
# stage runs that many micro-batches further ahead), and at the smallest and the largest lead on
# a copy of the cluster whose cross-type link is free (the compute-only step), and at lead 0 with
# overlap off (parallel.overlap false: every send blocks its rank until its last byte has left,
# the baseline). ROUNDS rounds of every variant, alternating; medians of the last logged
# interval's step time; the emulation overrun of every run (figures are only honest below 2%).
# Also prints what the cost model predicts for each overlapped variant.
# Usage: bench/overlap_bench.sh [OUT_DIR]   (default runs/overlap-bench)
#   env: H2_BIN (build/bin), ROUNDS (3), STEPS (6), LEADS ("0 1 2"), SEGMENTS ("": segment
#   sizes in KiB, each run at the largest lead with a BF16 wire; 0 is the unsegmented wire),
#   ZEROPP (1: also the ZeroPP plan of bench/overlap/zeropp-*.yaml, prefetch against overlap off),
#   ONLY (a regular expression: run only the variants it matches)
# About 15 minutes on 2 cores; run it on a quiet machine (bench/quiet_machine.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/overlap-bench}
mkdir -p "$out"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
exec python3 bench/overlap_bench.py --out "$out" --bin "${H2_BIN:-build/bin}" \
  --rounds "${ROUNDS:-3}" --steps "${STEPS:-6}" --leads ${LEADS:-0 1 2} \
  --segments ${SEGMENTS:-} ${ZEROPP:+--zeropp} --only "${ONLY:-}"
