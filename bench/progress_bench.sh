#!/usr/bin/env bash
# Progress while computing: a helper thread per rank (H2_PROGRESS_THREAD_US > 0, polling the
# communicators every that many microseconds while a unit computes) against progress at safe
# points only (0, the default: between units and after actions, on the compute thread). Two
# settings, because the helper's cost depends on whether the rank's own CPU does the compute:
#   emulated  bench/overlap_bench.sh's lead-2 pipeline and ZeroPP prefetch plan on virtual chips
#             (the compute thread mostly waits for the modelled kernel time), once per interval;
#   cpu       a 2-stage pipeline of configs/train/tiny.yaml on cpu:0 under h2run -n 2, 40 steps
#             of 8 micro-batches (both ranks' kernels share the 2 cores), alternating intervals,
#             ROUNDS rounds; tokens/s of the last logged interval.
# Usage: bench/progress_bench.sh [OUT_DIR]   (default runs/progress-bench)
#   env: H2_BIN (build/bin), INTERVALS ("0 50 1000"), PARTS ("emulated cpu"), ROUNDS (5; the
#   emulated part runs 3 rounds per interval)
# About 20 minutes on 2 cores; run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/progress-bench}
bin=${H2_BIN:-build/bin}
read -ra intervals <<<"${INTERVALS:-0 50 1000}"
parts=" ${PARTS:-emulated cpu} "
rounds=${ROUNDS:-5}
mkdir -p "$out"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
{
  echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "# flags: $(grep -o -w 'avx2\|avx512f\|avx512_bf16\|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
} >"$out/machine.txt"

if [[ $parts == *" emulated "* ]]; then
  for us in "${intervals[@]}"; do
    H2_PROGRESS_THREAD_US=$us ROUNDS=3 LEADS=2 ZEROPP=1 ONLY="^lead2$|zeropp-prefetch" \
      H2_BIN="$bin" bash bench/overlap_bench.sh "$out/emulated-$us" >"$out/emulated-$us.log" 2>&1
    echo "emulated, H2_PROGRESS_THREAD_US=$us:"
    grep -E '^\| (lead2|zeropp-prefetch) ' "$out/emulated-$us/summary.md"
  done
fi

if [[ $parts == *" cpu "* ]]; then
  for r in $(seq "$rounds"); do
    for us in "${intervals[@]}"; do
      H2_PROGRESS_THREAD_US=$us "$bin/h2run" -n 2 -- "$bin/h2" train configs/train/tiny.yaml \
        --set parallel.mode=pipeline --set model.tie_embeddings=false --set train.steps=40 \
        --set train.grad_accum=8 --set train.eval_every=0 --set log.every=20 \
        --set checkpoint.every=0 >"$out/cpu-$us.$r.log" 2>&1
    done
  done
  for us in "${intervals[@]}"; do
    python3 - "$us" "$out"/cpu-"$us".*.log <<'PY'
import re, statistics, sys
rates = []
for path in sys.argv[2:]:
    lines = [l for l in open(path) if "step 40/40" in l and "tok/s" in l]
    if lines:
        rates.append(float(re.search(r"(\d+) tok/s", lines[-1]).group(1)))
print(f"cpu, H2_PROGRESS_THREAD_US={sys.argv[1]}: median {statistics.median(rates):.0f} tok/s "
      f"over {len(rates)} runs ({', '.join('%.0f' % r for r in rates)})")
PY
  done
fi
