#!/usr/bin/env bash
# End-to-end check of the `h2` command line: train the tiny config briefly with --set overrides,
# sample from the checkpoint, and check that a bad config exits 2 naming the key and the file
# (without H2's source lines unless H2_LOG_LEVEL=debug); generate takes ids; an export imports
# with a config that trains as written; an unknown command is named; --version
# names the commit and the build's features; --print-config and --dry-run do no training.
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
[[ $(grep -c '"event":"step"' metrics.jsonl) -eq 2 ]] || { echo "expected 2 step records"; exit 1; }
grep -q '"event":"start"' metrics.jsonl || { echo "no start record in metrics.jsonl"; exit 1; }
[[ -f ckpt/step_000020/manifest.json ]] || { echo "no checkpoint written"; exit 1; }

sample=$("$h2" generate ckpt --prompt "The " --tokens 40 --seed 3)
[[ ${#sample} -ge 40 ]] || { echo "generate printed too little: '$sample'"; exit 1; }
# The prompt as ids (any vocabulary): "Th" is 84,104 in bytes.
sample=$("$h2" generate ckpt --ids 84,104 --tokens 5 --temperature 0)
[[ $sample == Th* && ${#sample} -eq 7 ]] || { echo "generate --ids printed '$sample'"; exit 1; }

# export -> import --config-out: the written config trains as it is (from the imported weights).
"$h2" export ckpt --out hf >/dev/null
for file in config.json generation_config.json tokenizer.json tokenizer_config.json model.safetensors; do
  [[ -f hf/$file ]] || { echo "export wrote no $file"; exit 1; }
done
"$h2" import hf --out imported --config-out imported.yaml >/dev/null
"$h2" train imported.yaml --set train.steps=2 --set train.eval_every=0 >imported.log ||
  { echo "the imported config did not train: $(tail -3 imported.log)"; exit 1; }
grep -q "resumed from imported/step_000000" imported.log || { echo "did not start from the import"; exit 1; }

set +e
err=$("$h2" train "$root/configs/train/tiny.yaml" --set model.n_heads=3 2>&1 >/dev/null)
code=$?
set -e
[[ $code -eq 2 ]] || { echo "bad config exited $code, not 2"; exit 1; }
grep -q "model.dim = 128" <<<"$err" && grep -q "model.n_heads = 3 (--set)" <<<"$err" ||
  { echo "bad-config message lacks key/value/origin: $err"; exit 1; }
# H2's own source lines are for developers: shown only at H2_LOG_LEVEL=debug.
source_line='[a-z_/]+\.(cpp|h|cu):[0-9]+'
if grep -Eq "$source_line" <<<"$err"; then echo "error shows a source line: $err"; exit 1; fi
set +e
debug_err=$(H2_LOG_LEVEL=debug "$h2" train "$root/configs/train/tiny.yaml" --set model.n_heads=3 2>&1 >/dev/null)
set -e
grep -Eq "raised at $source_line" <<<"$debug_err" || { echo "debug error lacks the source line: $debug_err"; exit 1; }

set +e
err=$("$h2" bogus 2>&1 >/dev/null)
code=$?
set -e
[[ $code -eq 2 ]] && grep -q "unknown command 'bogus'" <<<"$err" && grep -q "train, generate" <<<"$err" ||
  { echo "h2 bogus: exit $code, '$err'"; exit 1; }
version=$("$h2" --version)
grep -Eq '^h2 [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{12}(-dirty)?\)$|\(commit unknown\)' <<<"$version" &&
  grep -q "built with: CUDA o[nf]" <<<"$version" || { echo "h2 --version: '$version'"; exit 1; }

# --print-config: the effective YAML, --set applied; --dry-run: checks, no step, no output files.
"$h2" train "$root/configs/train/tiny.yaml" --set train.lr=0.0123 --print-config >effective.yaml
grep -q "  lr: 0.0123" effective.yaml || { echo "--print-config lacks the --set value"; exit 1; }
"$h2" train effective.yaml --set train.steps=1 --set checkpoint.dir=ckpt-dry \
  --set log.metrics_file=dry/metrics.jsonl --dry-run >dry.log
grep -q "^dry run: the config, plan, data and memory check out; outputs: checkpoints in $work/ckpt-dry" dry.log ||
  { echo "--dry-run said: $(cat dry.log)"; exit 1; }
[[ ! -e ckpt-dry && ! -e dry/metrics.jsonl ]] || { echo "--dry-run wrote outputs"; exit 1; }
if grep -q "^step " dry.log; then echo "--dry-run trained"; exit 1; fi
echo "cli ok"
