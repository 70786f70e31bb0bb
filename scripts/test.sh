#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the whole test suite with CTest. Tests labelled
# `cuda` run only where a GPU is visible (nvidia-smi -L lists one); everything else always runs.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -eq 0 ]]; then bash scripts/install_deps.sh; else sudo bash scripts/install_deps.sh; fi
bash scripts/build.sh "$@"
exclude=()
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU); then
  echo "test.sh: no GPU visible: skipping tests labelled cuda"
  exclude=(-LE cuda)
fi
ctest --test-dir build --output-on-failure -j "$(nproc)" "${exclude[@]}"
