#!/usr/bin/env bash
# Checkpoint save speed and memory of a 124M Llama (1.95 GB of f32 weights and AdamW moments):
# one training step, then the checkpoint. The save's time is from the opening of the rank's
# .safetensors.tmp to the rename of the finished folder (strace timestamps); max RSS of the whole
# process (/usr/bin/time). Run it with checkpoint.dir= (no save) for the RSS without a save, and
# next to `dd if=/dev/zero of=FILE bs=16M count=128 conv=fsync`, the disk's fsync'd bandwidth.
# Usage: bench/checkpoint_save_bench.sh OUT_DIR (relative to the repository root; needs
# build/bin/h2 and strace)
set -euo pipefail
cd "$(dirname "$0")/.."
d=$1; rm -rf "$d"; mkdir -p "$d"
source bench/train_shapes.sh
train_shape 124m  # h2_model
args=(configs/train/tiny.yaml "${h2_model[@]}" --set train.steps=1 --set train.grad_accum=1
  --set train.eval_every=0 --set log.every=1)
H2_CPU_PEAK_GFLOPS=100 /usr/bin/time -f "%e s %M KB" strace -f -tt -e trace=openat,rename,renameat,renameat2 -o "$d"/strace.txt \
  build/bin/h2 train "${args[@]}" --set checkpoint.dir="$d"/ckpt --set checkpoint.every=1 > "$d"/log.txt 2> "$d"/time.txt
python3 - "$d" <<'PY'
import re,sys,datetime
d=sys.argv[1]
t=lambda s: datetime.datetime.strptime(s,"%H:%M:%S.%f")
lines=open(d+"/strace.txt").read().splitlines()
start=[l for l in lines if "rank_00000.safetensors.tmp" in l and "openat" in l]
end=[l for l in lines if "rename" in l and "step_000001" in l and ".tmp_step" in l]
s=t(start[0].split()[1]); e=t(end[-1].split()[1])
import os
size=sum(os.path.getsize(os.path.join(r,f)) for r,_,fs in os.walk(d+"/ckpt") for f in fs)
print(f"save {(e-s).total_seconds():.2f} s, {size/1e6:.0f} MB, {size/1e6/(e-s).total_seconds():.0f} MB/s;", open(d+"/time.txt").read().strip().splitlines()[-1])
PY
