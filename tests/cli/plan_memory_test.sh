#!/usr/bin/env bash
# HeteroAuto's memory promise, end to end on one virtual chip: a plan on the smallest chip h2 plan
# accepts it for (its predicted peak is 95% of the chip: the memory model's margin) trains
# without running out of memory, and the same plan on a chip 10% smaller than the prediction
# (h2 plan refuses it: "does not fit") does run out when started anyway (parallel.memory_check=false skips the start-up
# estimate, so the device allocator decides). The chip's capacity is the only difference.
# Usage: plan_memory_test.sh H2_BINARY REPO_ROOT
set -euo pipefail
h2=$1
root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

cluster() {  # cluster(MEMORY_BYTES): one fast virtual chip, so pacing costs nothing
  cat >"cluster-$1.yaml" <<YAML
name: one-chip
chips:
  - name: chip-x
    memory: $1
    memory_bandwidth: 1e12
    link_bandwidth: 1e12
    peak_flops: {f32: 1e13}
    dtypes: [f32, i32, i64, u8]
nodes:
  - {chip: chip-x, count: 1}
YAML
  echo "cluster-$1.yaml"
}
cat >job.yaml <<YAML
model: {vocab_size: 256, dim: 64, n_layers: 2, n_heads: 4, n_kv_heads: 4, ffn_dim: 172,
        seq_len: 64, tie_embeddings: false}
train: {batch_size: 8, grad_accum: 2, steps: 3, lr: 1.0e-3, warmup_steps: 1, eval_every: 0}
data: {path: /usr/share/common-licenses/GPL-3}
log: {every: 1, metrics_file: metrics.jsonl}
checkpoint: {dir: ""}
YAML

# The best plan on a roomy chip, and its predicted peak in bytes.
roomy=$(cluster 1GiB)
"$h2" plan --cluster "$roomy" job.yaml --profiles profiles --out plan.yaml >plan.log
peak_mib=$("$h2" plan --cluster "$roomy" job.yaml --profiles profiles --evaluate plan.yaml |
  sed -n 's/.*busy [0-9.]* ms, \([0-9.]*\) of [0-9.]* MiB.*/\1/p' | head -1)
[[ -n $peak_mib ]] || { echo "no predicted peak in h2 plan --evaluate"; cat plan.log; exit 1; }
fits=$(python3 -c "print(int(($peak_mib + 0.05) / 0.95 * 1.005 * 2**20))")  # printed to 0.1 MiB
short=$(python3 -c "print(int(($peak_mib - 0.05) * 0.90 * 2**20))")

# Accepted: on a chip just large enough for h2 plan, the plan trains.
ok=$(cluster "$fits")
"$h2" plan --cluster "$ok" job.yaml --profiles profiles --evaluate plan.yaml >accepted.log
if grep -q "ruled out by memory\|does not fit" accepted.log; then
  echo "h2 plan refused the plan on a chip above its own prediction"; cat accepted.log; exit 1
fi
"$h2" train job.yaml --set cluster.file="$ok" --set parallel.plan=plan.yaml \
  --set parallel.memory_check=false >train-ok.log 2>&1 ||
  { echo "the accepted plan failed to train:"; tail -5 train-ok.log; exit 1; }
grep -q '"event":"done"' metrics.jsonl || { echo "accepted plan: no done line"; exit 1; }

# Refused: on a chip 10% below the prediction h2 plan says it does not fit, and it runs out.
small=$(cluster "$short")
"$h2" plan --cluster "$small" job.yaml --profiles profiles --evaluate plan.yaml >refused.log
grep -q "does not fit" refused.log ||
  { echo "h2 plan accepted a plan 10% above the chip's memory"; cat refused.log; exit 1; }
set +e
"$h2" train job.yaml --set cluster.file="$small" --set parallel.plan=plan.yaml \
  --set parallel.memory_check=false --set log.metrics_file=refused.jsonl >train-oom.log 2>&1
code=$?
set -e
[[ $code -ne 0 ]] || { echo "the refused plan trained without running out of memory"; exit 1; }
grep -qi "out of memory" train-oom.log ||
  { echo "the refused plan failed, but not for memory:"; tail -5 train-oom.log; exit 1; }
echo "plan memory ok: predicted peak $peak_mib MiB; trains at 1.06x, runs out at 0.90x"
