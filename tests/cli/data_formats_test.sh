#!/usr/bin/env bash
# Real data layouts train: an llm.c shard set (train_*.bin by pattern, val_*.bin as
# data.val_path, the header and uint16 tokens of llm.c's data_common.py) and nanoGPT's headerless
# train.bin / val.bin (data.format uint16), both made from the GPL-3 text every Debian has, one
# token per byte. Each run must evaluate on the validation files and learn (the last logged loss
# at least 1 nat below the first); a .bin read as text is refused naming data.format.
# Usage: data_formats_test.sh H2_BINARY REPO_ROOT PYTHON
set -euo pipefail
h2=$1
root=$2
python=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

"$python" - <<'PY'
import array, os, struct
data = open("/usr/share/common-licenses/GPL-3", "rb").read()
cut = len(data) * 9 // 10
train, val = data[:cut], data[cut:]
os.makedirs("llmc", exist_ok=True)
def llmc(path, tokens):  # llm.c dev/data/data_common.py write_datafile, GPT-2 layout
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(array.array("H", list(tokens)).tobytes())
third = len(train) // 3
for i in range(3):
    llmc(f"llmc/train_{i:06d}.bin", train[i * third:(i + 1) * third])
llmc("llmc/val_000000.bin", val)
os.makedirs("nanogpt", exist_ok=True)
array.array("H", list(train)).tofile(open("nanogpt/train.bin", "wb"))  # prepare.py: no header
array.array("H", list(val)).tofile(open("nanogpt/val.bin", "wb"))
PY

# train NAME FORMAT PATH VAL_PATH: 60 steps of the tiny model, eval at the end.
train() {
  "$h2" train "$root/configs/train/tiny.yaml" --set train.steps=60 --set train.eval_every=60 \
    --set log.every=10 --set data.format="$2" --set data.path="$3" --set data.val_path="$4" \
    --set log.metrics_file="$1.jsonl" >"$1.log"
  "$python" - "$1" <<'PY'
import json, sys
name = sys.argv[1]
records = [json.loads(line) for line in open(f"{name}.jsonl")]
steps = [r for r in records if r["event"] == "step"]
evals = [r for r in records if r["event"] == "eval"]
first, last = steps[0]["loss"], steps[-1]["loss"]
assert last < first - 1.0, f"{name}: loss {first:.3f} -> {last:.3f}: did not learn"
assert evals and evals[-1]["eval_loss"] < first - 0.5, f"{name}: eval {evals}"
print(f"{name}: loss {first:.3f} -> {last:.3f}, eval {evals[-1]['eval_loss']:.3f}")
PY
}
train llmc bin 'llmc/train_*.bin' 'llmc/val_*.bin'
grep -q "3 files" llmc.log || { echo "the shard set was not read as 3 files: $(head -1 llmc.log)"; exit 1; }
train nanogpt uint16 nanogpt/train.bin nanogpt/val.bin

set +e
err=$("$h2" train "$root/configs/train/tiny.yaml" --set data.path=nanogpt/train.bin 2>&1 >/dev/null)
code=$?
set -e
[[ $code -eq 2 ]] && grep -q "data.format is text" <<<"$err" ||
  { echo "a .bin read as text: exit $code, '$err'"; exit 1; }
echo "data formats ok"
