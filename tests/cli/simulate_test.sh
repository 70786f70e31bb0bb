#!/usr/bin/env bash
# `h2 simulate` end to end at scale: plan the 100B-class Llama on the 1,024-chip paper cluster with
# data-sheet profiles, simulate the chosen plan's step, and check what a user relies on: the
# report's figures (the step close to the cost model's, which shares its computes; every
# position's time split adding up to the step), a Chrome trace of the sampled ranks, and a bad
# rank list refused naming the value.
# Usage: simulate_test.sh H2_BINARY REPO_ROOT
set -euo pipefail
h2=$1
root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cluster=$root/configs/clusters/scale-1024.yaml
config=$root/configs/train/llama-100b.yaml

"$h2" plan --datasheet --cluster "$cluster" "$config" --profiles profiles --out plan.yaml >plan.log
"$h2" simulate --datasheet --cluster "$cluster" --plan plan.yaml "$config" --profiles profiles \
  --json report.json --trace trace.json >simulate.log
python3 - <<'PY'
import json
r = json.load(open("report.json"))
step, cost = r["step_s"], r["cost_model_step_s"]
assert 0.85 < step / cost < 1.15, f"simulated {step} s against the cost model's {cost} s"
assert r["ranks"] >= 512 and r["tasks"] > r["ranks"], r
for p in r["positions"]:
    parts = p["compute_s"] + p["staging_s"] + p["exposed_s"] + p["idle_s"]
    assert abs(parts - step) < 1e-6 * step, (p, step)
    assert p["peak_bytes"] <= p["capacity_bytes"], p
t = json.load(open("trace.json"))
names = {e["name"] for e in t["traceEvents"] if e["ph"] == "X"}
assert "F0.0" in names and "optimizer" in names, sorted(names)[:20]
PY
grep -q "simulated step" simulate.log || { echo "no step line"; cat simulate.log; exit 1; }

set +e
err=$("$h2" simulate --datasheet --cluster "$cluster" --plan plan.yaml "$config" \
  --profiles profiles --trace-ranks 0,99999 2>&1 >/dev/null)
code=$?
set -e
[[ $code -eq 2 ]] || { echo "bad --trace-ranks exited $code, not 2"; exit 1; }
grep -q "'99999'" <<<"$err" || { echo "the error does not name the rank: $err"; exit 1; }
echo "simulate ok"
