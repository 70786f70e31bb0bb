#!/usr/bin/env bash
# Installs the dependencies, builds, and runs H2's main job on its small built-in default.
# (Until training lands this is the kernel demo: a transformer block's ops on the CPU and on a
# virtual chip, each checked against the CPU backend.)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -eq 0 ]]; then bash scripts/install_deps.sh; else sudo bash scripts/install_deps.sh; fi
bash scripts/build.sh
./build/bin/h2 demo --device cpu
./build/bin/h2 demo --device vchip:chip-a --dtype bf16
