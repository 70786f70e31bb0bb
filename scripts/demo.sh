#!/usr/bin/env bash
# Installs the dependencies, builds, and runs H2's main job on its small built-in default: a
# heterogeneous pipeline on an emulated mixed cluster of 4 ranks (configs/train/hetero-4.yaml:
# two fast chip-a and two slow chip-b virtual chips, uneven stages, FSDP inside each pair; about
# a minute on 2 cores, the loss falls from 5.5 to about 2.3), then text sampled from the trained
# model, then the kernel demo on a virtual chip.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -eq 0 ]]; then bash scripts/install_deps.sh; else sudo bash scripts/install_deps.sh; fi
bash scripts/build.sh
./build/bin/h2run -n 4 -- ./build/bin/h2 train configs/train/hetero-4.yaml
./build/bin/h2 generate runs/hetero-4 --prompt "The " --tokens 200
echo
./build/bin/h2 demo --device vchip:chip-a --dtype bf16
