#!/usr/bin/env bash
# Runs tests/ops/same_bits_dump.cpp's kernels natively and on the AVX2 path (H2_CPU_MAX_ISA=avx2)
# and expects every output hash to agree: the x86-64-v4 build of their loops, chosen where the
# CPU has AVX-512, and the default build give the same bits. On a CPU without AVX-512 both runs
# take the default build and agree trivially. Exit 70 (skipped) where the kernels were built for
# more than AVX2 and cannot run capped (backends/cpu/kernel_isa.h).
# Usage: same_bits_across_paths.sh DUMP_BINARY
set -euo pipefail
dump=$1
# Both runs load the same OpenBLAS kernels, the AVX2 path's (the environment's choice where it
# makes one): the cap does not reach OpenBLAS, which otherwise warns on stdout and runs the CPU's
# own kernels in the capped run.
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
native=$("$dump")
set +e
capped=$(H2_CPU_MAX_ISA=avx2 "$dump")
rc=$?
set -e
if ((rc == 70)); then
  echo "skipped: the kernels were built for more than AVX2"
  exit 70
fi
((rc == 0)) || { echo "the capped run failed (exit $rc)"; exit 1; }
lines=$(wc -l <<<"$native")
((lines >= 20)) || { echo "expected at least 20 kernel lines, got $lines:"; echo "$native"; exit 1; }
if [[ $native != "$capped" ]]; then
  echo "kernels whose bits differ between the native and the AVX2 path (native < > avx2):"
  diff <(echo "$native") <(echo "$capped") || true
  exit 1
fi
echo "$lines kernel outputs with the same bits natively and on the AVX2 path"
