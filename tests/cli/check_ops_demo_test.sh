#!/usr/bin/env bash
# The README's shadow-checking command on every device `h2 devices` lists (cpu:0, each virtual
# chip, cuda:N where a GPU exists), in f32 and bf16: every op also runs on the CPU backend and is
# compared. It must end with "demo OK" and no mismatch warning; it once recursed through copy
# until the stack overflowed (issue 16).
# Usage: check_ops_demo_test.sh H2_BINARY
set -euo pipefail
h2=$1
devices=$("$h2" devices | awk 'NR > 1 && $1 ~ /^(cpu|vchip|cuda):[0-9]+$/ { print $1 }')
[[ -n $devices ]] || { echo "h2 devices listed no device"; exit 1; }
for device in $devices; do
  for dtype in f32 bf16; do
    log=$(H2_CHECK_OPS=all timeout 300 "$h2" demo --device "$device" --dtype "$dtype" 2>&1) ||
      { echo "$device $dtype failed: $log"; exit 1; }
    grep -q "demo OK" <<<"$log" || { echo "$device $dtype: no 'demo OK': $log"; exit 1; }
    if grep -q "differs from cpu" <<<"$log"; then echo "$device $dtype mismatch: $log"; exit 1; fi
    echo "$device $dtype: checked"
  done
done
