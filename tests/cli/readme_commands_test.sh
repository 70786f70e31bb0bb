#!/usr/bin/env bash
# Runs the README's commands as written: every command of its ```sh blocks (continuation lines
# joined) from a scratch folder that looks like a checkout (configs/, tools/, build/bin/ linked),
# in the README's order, so later commands find what earlier ones wrote (runs/tiny, hf/tiny).
# The few that are not cheap or need what CI lacks are skipped by name below, each with its
# reason; every other command must exit 0. A command added to the README is run from then on.
# Usage: readme_commands_test.sh REPO_ROOT BIN_DIR
set -euo pipefail
root=$1
bin_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/build"
ln -s "$bin_dir" "$work/build/bin"
for folder in configs tools scripts; do ln -s "$root/$folder" "$work/$folder"; done
cd "$work"

# Skipped: pattern (bash glob on the whole command) and why.
skip_reason() {
  case "$1" in
    "bash scripts/demo.sh" | "bash scripts/test.sh") echo "the set-up commands: CI runs test.sh itself" ;;
    *small-30m.yaml*) echo "needs ../shared/data and takes minutes" ;;
    srun* | "#!/bin/bash"* | "#SBATCH"* | export\ H2_STORE_ADDR* | export\ H2_JOB_TOKEN*) echo "needs Slurm" ;;
    *"h2run -n 4 -- ./build/bin/h2 train configs/train/hetero-4.yaml"*) echo "the main job: minutes (scripts/demo.sh; h2run_training_tests runs it shortened)" ;;
    *"h2run -n 8 --cluster configs/clusters/mixed-8.yaml"*) echo "8 ranks for minutes (bench/planner_bench.sh)" ;;
    *"train run.yaml"*) echo "a user's own config (run.yaml)" ;;
    *precision.recipe=nvfp4*) echo "1,000 steps of emulated FP4: minutes (precision tests cover it)" ;;
    *"h2 profile --cluster configs/clusters/mixed-8.yaml"*) echo "profiles 3 chip types: minutes (planner tests cover it)" ;;
    *"h2 plan --cluster configs/clusters/mixed-8.yaml"* | *"h2 plan --part chip-a"*) echo "needs the profiles above" ;;
    *) return 1 ;;
  esac
}

# The commands: lines of ```sh blocks, backslash continuations joined, comments and blanks dropped.
mapfile -t commands < <(awk '
  /^```sh/ { inside = 1; next }
  /^```/ { inside = 0; next }
  inside {
    line = $0
    if (pending != "") { line = pending " " line; pending = "" }
    if (line ~ /\\$/) { sub(/\\$/, "", line); pending = line; next }
    print line
  }' "$root/README.md")

ran=0 skipped=0
for command in "${commands[@]}"; do
  trimmed=$(sed -E 's/^[[:space:]]+//; s/[[:space:]]+#.*$//' <<<"$command")
  [[ -z $trimmed || $trimmed == \#\ * ]] && continue
  if why=$(skip_reason "$trimmed"); then
    echo "skip: $trimmed  ($why)"
    skipped=$((skipped + 1))
    continue
  fi
  started=$SECONDS
  if ! (eval "$trimmed") >out.log 2>&1; then
    echo "README command failed: $trimmed"
    tail -20 out.log
    exit 1
  fi
  echo "ran:  $trimmed  ($((SECONDS - started)) s)"
  ran=$((ran + 1))
done
echo "README commands: $ran run, $skipped skipped"
[[ $ran -ge 15 ]] || { echo "too few README commands ran ($ran): did the README's blocks move?"; exit 1; }
