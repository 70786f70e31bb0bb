#!/usr/bin/env bash
# End-to-end check of the `h2` command line: train the tiny config briefly with --set overrides,
# sample from the checkpoint, and check that a bad config exits 2 naming the key and the file.
# Usage: cli_test.sh H2_BINARY REPO_ROOT
set -euo pipefail
h2=$1
root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

"$h2" train "$root/configs/train/tiny.yaml" --set train.steps=20 --set train.eval_every=10 \
  --set log.every=10 --set checkpoint.dir=ckpt --set log.metrics_file=metrics.jsonl >train.log
grep -q '"event":"done"' metrics.jsonl || { echo "no done line in metrics.jsonl"; exit 1; }
[[ $(grep -c '"step"' metrics.jsonl) -ge 2 ]] || { echo "expected 2 step lines"; exit 1; }
[[ -f ckpt/step_000020/manifest.json ]] || { echo "no checkpoint written"; exit 1; }

sample=$("$h2" generate ckpt --prompt "The " --tokens 40 --seed 3)
[[ ${#sample} -ge 40 ]] || { echo "generate printed too little: '$sample'"; exit 1; }

set +e
err=$("$h2" train "$root/configs/train/tiny.yaml" --set model.n_heads=3 2>&1 >/dev/null)
code=$?
set -e
[[ $code -eq 2 ]] || { echo "bad config exited $code, not 2"; exit 1; }
grep -q "model.dim = 128" <<<"$err" && grep -q "model.n_heads = 3 (--set)" <<<"$err" ||
  { echo "bad-config message lacks key/value/origin: $err"; exit 1; }
echo "cli ok"
