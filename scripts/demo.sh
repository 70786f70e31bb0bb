#!/usr/bin/env bash
# Installs the dependencies, builds, and runs H2's main job on its small built-in default:
# HeteroAuto plans the emulated mixed cluster configs/clusters/mixed-4.yaml (two fast chip-a with
# little memory, two slow chip-b with more) for configs/train/hetero-4.yaml's model, profiling
# each chip type once (cached in runs/profiles), prints the best plans and why the runners-up
# lost, and trains 60 steps on the chosen plan (a few minutes on 2 cores; the loss falls from 5.5
# to about 2.6); then text sampled from the trained model, then the kernel demo on a virtual chip.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -eq 0 ]]; then bash scripts/install_deps.sh; else sudo bash scripts/install_deps.sh; fi
bash scripts/build.sh
./build/bin/h2run -n 4 --cluster configs/clusters/mixed-4.yaml -- ./build/bin/h2 train \
  configs/train/hetero-4.yaml --set parallel.plan=auto --set parallel.profiles=runs/profiles \
  --set train.steps=60 --set train.eval_every=30
./build/bin/h2 generate runs/hetero-4 --prompt "The " --tokens 200
echo
./build/bin/h2 demo --device vchip:chip-a --dtype bf16
