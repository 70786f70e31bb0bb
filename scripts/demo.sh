#!/usr/bin/env bash
# Installs the dependencies, builds, and runs H2's main job on its small built-in default:
# training the tiny byte-level Llama of configs/train/tiny.yaml on the CPU (about 20 s on
# 2 cores; the loss falls from 5.5 to under 2), then the kernel demo on a virtual chip.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -eq 0 ]]; then bash scripts/install_deps.sh; else sudo bash scripts/install_deps.sh; fi
bash scripts/build.sh
./build/bin/h2 train configs/train/tiny.yaml
./build/bin/h2 demo --device vchip:chip-a --dtype bf16
