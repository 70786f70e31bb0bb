#!/usr/bin/env bash
# H2 at 1,000+ chips by simulation (docs/scale.md): on the 1,024-chip paper cluster
# (configs/clusters/scale-1024.yaml, four chip types from public data sheets), a 7B and a
# 100B-class Llama planned by HeteroAuto and simulated by the cluster simulator, on each chip
# type alone and on the mixed cluster (the superlinear ratio), with the cross-type links 2-100x
# slower, FP8 on the wire allowed or not, ZeroPP off and its gather groups; the simulator's speed
# at 1,024 and 4,096 chips; and the homogeneous anchor (torchtitan's Llama 2 13B on 64 A100).
# Fills the generated block of docs/scale.md and writes the plots to docs/scale/.
# Usage: bench/scale_study.sh [OUT_DIR]   (default runs/scale-study; about 3 minutes on 2 cores)
#   env: H2_BIN (build/bin), DOC (docs/scale.md), PLOTS (docs/scale), PYTHON (/usr/bin/python3:
#        Debian's python3-matplotlib draws the plots, python3-yaml reads the plans).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/scale-study}
exec "${PYTHON:-/usr/bin/python3}" bench/scale_study.py --out "$out" --bin "${H2_BIN:-build/bin}" \
  --doc "${DOC:-docs/scale.md}" --plots "${PLOTS:-docs/scale}"
