#!/usr/bin/env bash
# The profile cache keeps profiles made differently apart: in one profile folder, `h2 plan
# --datasheet` with other efficiencies derives new profiles instead of reusing the first ones, a
# measuring `h2 plan` measures instead of taking a data-sheet profile as measured, and each of the
# three is reused when asked for again. (Before the origin was in the key, all three shared one
# file, so a plan could rest on figures of another kind than it said.)
# Usage: profile_cache_test.sh H2_BINARY
set -euo pipefail
h2=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# One fast virtual chip, so that measuring it takes seconds.
cat >cluster.yaml <<YAML
name: one-chip
chips:
  - name: chip-x
    memory: 1GiB
    memory_bandwidth: 1e12
    link_bandwidth: 1e12
    peak_flops: {f32: 1e13}
    dtypes: [f32, i32, i64, u8]
nodes:
  - {chip: chip-x, count: 1}
YAML
cat >job.yaml <<YAML
model: {vocab_size: 256, dim: 64, n_layers: 2, n_heads: 4, n_kv_heads: 4, ffn_dim: 172,
        seq_len: 64, tie_embeddings: false}
train: {batch_size: 8, grad_accum: 1, steps: 1, lr: 1.0e-3, warmup_steps: 1, eval_every: 0}
data: {path: /usr/share/common-licenses/GPL-3}
checkpoint: {dir: ""}
YAML

plan() {  # plan LOG [OPTIONS...]: h2 plan into LOG
  local log=$1
  shift
  "$h2" plan --cluster cluster.yaml job.yaml --profiles profiles "$@" >"$log" 2>&1 ||
    { echo "h2 plan $* failed:"; cat "$log"; exit 1; }
}
files() { find profiles -name '*.json' | wc -l; }
expect() {  # expect LOG TEXT WHY
  grep -qF -- "$2" "$1" || { echo "$3: no '$2' in $1:"; cat "$1"; exit 1; }
}
origin_of() {  # the origins of the profiles in the folder, one per line, sorted
  python3 -c 'import glob, json
print("\n".join(sorted(json.load(open(f))["origin"] for f in glob.glob("profiles/*.json"))))'
}

plan default.log --datasheet
expect default.log "from its data-sheet figures" "the first data-sheet plan"
[[ $(files) -eq 1 ]] || { echo "$(files) profiles after one data-sheet plan"; exit 1; }

plan slower.log --datasheet --efficiency 0.3,0.2,0.4
expect slower.log "from its data-sheet figures" "other efficiencies derived nothing new"
expect slower.log "GEMM 0.3 x N" "the new profile does not state its efficiencies"
[[ $(files) -eq 2 ]] || { echo "$(files) profiles after two data-sheet plans"; exit 1; }

plan measured.log
expect measured.log "measuring" "a measuring plan took a data-sheet profile"
[[ $(files) -eq 3 ]] || { echo "$(files) profiles after the measuring plan"; exit 1; }
[[ $(origin_of | grep -c '^datasheet') -eq 2 && $(origin_of | grep -c '^measured$') -eq 1 ]] ||
  { echo "origins in the folder:"; origin_of; exit 1; }

# Asked for again, each is read back, and nothing is derived or measured.
for kind in default slower measured; do
  case $kind in
    default) plan again.log --datasheet ;;
    slower) plan again.log --datasheet --efficiency 0.3,0.2,0.4 ;;
    measured) plan again.log ;;
  esac
  expect again.log "chip-x: profile profiles/" "the $kind profile was not reused"
  if grep -q "measuring\|from its data-sheet figures" again.log; then
    echo "the $kind profile was made again:"
    cat again.log
    exit 1
  fi
done
[[ $(files) -eq 3 ]] || { echo "$(files) profiles after the repeats"; exit 1; }
echo "profile cache ok"
