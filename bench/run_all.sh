#!/usr/bin/env bash
# Runs h2_bench_kernels and its PyTorch peer alternately ROUNDS times, then h2_bench_vchip
# ROUNDS times, and merges each program's runs into medians (bench/median_tables.py). Each run
# starts on a quiet machine (no compiler or build running, CPUs over 90% idle for 3 s); a run
# during which other processes used the CPUs is discarded and repeated (up to TRIES times), so
# a shared machine yields undisturbed figures or says that it could not (load.txt).
# Usage: bench/run_all.sh [OUT_DIR]   (default build-b/bench-results)
#   env: ROUNDS (3), BUILD (build-b), PY (.venv-bench/bin/python), REPEATS (5), THREADS (2),
#        TRIES (20), KERNEL_ARGS (more flags for both kernel benchmarks), VCHIP (1; 0 skips it)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-b}
out=${1:-$build/bench-results}
rounds=${ROUNDS:-3}
py=${PY:-.venv-bench/bin/python}
repeats=${REPEATS:-5}
threads=${THREADS:-2}
tries=${TRIES:-20}
read -ra kernel_args <<<"${KERNEL_ARGS:-}"
mkdir -p "$out"
: >"$out/load.txt"

source bench/quiet_machine.sh

# run NAME CMD...: CMD's output into $out/NAME.md (quiet_run).
run() {
  quiet_run "$1" "$out/$1.md" /dev/stderr "${@:2}"
}

for i in $(seq "$rounds"); do
  run "h2_kernels.$i" "$build/bin/h2_bench_kernels" --repeats "$repeats" --threads "$threads" \
    "${kernel_args[@]}"
  run "torch_kernels.$i" "$py" bench/peer_torch_kernels.py --repeats "$repeats" \
    --threads "$threads" "${kernel_args[@]}"
done
names=(h2_kernels torch_kernels)
if [[ ${VCHIP:-1} != 0 ]]; then
  for i in $(seq "$rounds"); do
    run "h2_vchip.$i" "$build/bin/h2_bench_vchip" --repeats "$repeats" --threads "$threads"
  done
  names+=(h2_vchip)
fi
for name in "${names[@]}"; do
  python3 bench/median_tables.py "$out/$name".*.md >"$out/$name.median.md"
done
echo "results in $out (load log: $out/load.txt)"
