#!/usr/bin/env bash
# Numerical fingerprint of H2's training paths: runs a fixed set of short jobs (single process,
# data parallel, every pipeline schedule, HeteroPP groups with FSDP, wire dtypes, low precision)
# and prints, per job, every step's loss, gradient norm and evaluation loss at full precision
# plus a SHA-256 of the final weights (exported as a Hugging Face folder). Two builds whose
# fingerprints are equal train bit-identically; a refactor proves "behaviour unchanged" with
#   tools/loss_fingerprint.sh OLD_BUILD/bin > old.txt; tools/loss_fingerprint.sh build/bin > new.txt
#   diff old.txt new.txt
# Usage: tools/loss_fingerprint.sh [BIN_DIR (default build/bin)] [WORK_DIR (default a temp dir)]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build/bin}")
work=${2:-$(mktemp -d /tmp/h2-fingerprint.XXXXXX)}
mkdir -p "$work"
export H2_VCHIP_TIME_SCALE=0  # pacing changes timing only; skip it
export H2_LOG_LEVEL=warn

common=(--set train.steps=12 --set train.eval_every=6 --set log.every=1 --set train.warmup_steps=3
        --set checkpoint.every=0)

# run NAME RANKS CONFIG [--set ...]: trains, then prints the job's fingerprint lines.
run() {
  local name=$1 ranks=$2 config=$3
  shift 3
  local dir=$work/$name
  rm -rf "$dir"
  local args=("$config" "${common[@]}" --set "log.metrics_file=$dir/metrics.jsonl"
              --set "checkpoint.dir=$dir/ckpt" "$@")
  if ((ranks == 1)); then
    "$bin/h2" train "${args[@]}" >"$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  else
    "$bin/h2run" -n "$ranks" -- "$bin/h2" train "${args[@]}" >"$dir.log" 2>&1 ||
      { cat "$dir.log"; exit 1; }
  fi
  "$bin/h2" export "$dir/ckpt" --format hf --out "$dir/hf" >/dev/null
  python3 - "$name" "$dir/metrics.jsonl" <<'EOF'
import json, sys
name, path = sys.argv[1], sys.argv[2]
for line in open(path):
    r = json.loads(line)
    if r.get("event") != "step":
        continue
    ev = r.get("eval_loss")
    print(f"{name} step {r['step']} loss {r['loss']!r} grad_norm {r.get('grad_norm')!r}"
          + (f" eval {ev!r}" if ev is not None else ""))
EOF
  echo "$name weights $(sha256sum "$dir/hf/model.safetensors" | cut -c1-16)"
}

tiny=configs/train/tiny.yaml
untied=(--set model.tie_embeddings=false)
run single-f32 1 $tiny
run single-bf16 1 $tiny --set train.dtype=bf16
run single-accum3 1 $tiny --set train.grad_accum=3
run single-fp8 1 $tiny --set precision.recipe=fp8_blockwise
run single-recompute-free-untied 1 $tiny "${untied[@]}"
run dp2 2 $tiny --set parallel.mode=dp --set train.grad_accum=2
run dp3 3 $tiny --set parallel.mode=dp --set parallel.bucket_mb=0.1
run pp2-1f1b 2 $tiny --set parallel.mode=pipeline --set train.grad_accum=4
run pp2-gpipe 2 $tiny --set parallel.mode=pipeline --set train.grad_accum=4 --set parallel.schedule=gpipe
run pp2-zbh1 2 $tiny --set parallel.mode=pipeline --set train.grad_accum=4 --set parallel.schedule=zb-h1
run pp2-interleaved 2 $tiny --set parallel.mode=pipeline --set train.grad_accum=4 \
  --set parallel.schedule=interleaved-1f1b --set parallel.chunks=2
run pp4 4 $tiny --set parallel.mode=pipeline --set train.grad_accum=4 "${untied[@]}"
run pp2-uneven 2 $tiny --set parallel.mode=pipeline --set train.grad_accum=4 --set parallel.stage_layers=3,1
run hetero4-fsdp 4 configs/train/hetero-4.yaml
run hetero4-plan-zeropp 4 configs/train/hetero-4.yaml --set parallel.plan=configs/plans/hetero-4.yaml \
  --set parallel.gather_group=2
run hetero3-wire-bf16 3 configs/train/hetero-4.yaml --set parallel.stage_ranks=2,1 \
  --set parallel.fsdp=false --set cluster.devices= --set parallel.wire_dtype=bf16
run hetero3-wire-f8 3 configs/train/hetero-4.yaml --set parallel.stage_ranks=1,2 \
  --set cluster.devices= --set parallel.wire_dtype=f8e4m3
