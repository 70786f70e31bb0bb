#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the whole test suite with CTest, then the short fuzz
# tier (every parser's libFuzzer target for H2_FUZZ_SECONDS, default 10, under ASan and UBSan;
# 0 skips it). Tests labelled `cuda` run only where a GPU is visible (nvidia-smi -L lists one);
# everything else always runs. Longer tiers, by hand or nightly: tools/fuzz.sh --seconds 600,
# tools/sanitize.sh (ASan+UBSan and TSan builds of the CPU tests).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time, printed at the end (CI's budget is 30 minutes on 2 cores).
phases=()
phase_start=$SECONDS
phase_done() {
  phases+=("$1 $((SECONDS - phase_start)) s")
  phase_start=$SECONDS
}
trap 'echo "test.sh: ${phases[*]/%/;} total $SECONDS s"' EXIT
if [[ $(id -u) -eq 0 ]]; then bash scripts/install_deps.sh; else sudo bash scripts/install_deps.sh; fi
# ml_dtypes, the reference of tests/python/check_ml_dtypes.py (low-precision formats), in a venv
# that scripts/build.sh hands to CMake; without it (no network) that test is skipped locally and
# fails in CI (CI=true: tests/python/skip_or_fail.py).
venv=build/venv-test
if ! "$venv/bin/python" -c "import ml_dtypes" >/dev/null 2>&1; then
  system_python=$(command -v /usr/bin/python3 || command -v python3 || true)
  if ! { "$system_python" -m venv "$venv" &&
    "$venv/bin/pip" install -q --retries 1 --timeout 30 ml_dtypes==0.6.0; }; then
    echo "test.sh: warning: could not install ml_dtypes into $venv; its check will be skipped" \
      "(a failure where CI=true)" >&2
  fi
fi
phase_done dependencies
bash scripts/build.sh "$@"
phase_done build
exclude=()
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU); then
  echo "test.sh: no GPU visible: skipping tests labelled cuda"
  exclude=(-LE cuda)
fi
# Tests share the 2 cores two at a time, each with an OpenMP team of every core: libgomp's
# default spin-waiting then stalls every barrier on a descheduled thread (a 0.5 s trainer test
# took 64 s beside an h2 train; 0.5 s with passive waiting).
export OMP_WAIT_POLICY=passive
ctest_status=0
ctest --test-dir build --output-on-failure -j "$(nproc)" "${exclude[@]}" || ctest_status=$?
phase_done ctest
((ctest_status == 0)) || exit "$ctest_status"
fuzz_seconds=${H2_FUZZ_SECONDS:-10}
if [[ $fuzz_seconds != 0 ]]; then
  bash tools/fuzz.sh --seconds "$fuzz_seconds" --jobs "$(nproc)" --quick-build
  phase_done fuzz
fi
