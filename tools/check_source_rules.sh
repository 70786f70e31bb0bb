#!/usr/bin/env bash
# Enforces the source rules of docs/architecture.md on the tracked and untracked source files:
#   1. no source file over 800 lines;
#   2. no vendor header outside its backend's folder;
#   3. every file formatted with the repository's .clang-format (skipped if clang-format is absent).
# Prints each violation and exits 1 if there is any.
set -uo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.h' '*.hpp' '*.cpp' '*.cc' '*.cu' '*.cuh' '*.h.in' | sort -u |
  while IFS= read -r f; do [[ -f $f ]] && echo "$f"; done)
status=0

for f in "${files[@]}"; do
  lines=$(wc -l <"$f")
  if ((lines > 800)); then
    echo "too long: $f has $lines lines (limit 800)"
    status=1
  fi
done

# header pattern -> folders (space-separated prefixes) allowed to include it. The GEMM library
# benchmark compares the CPU GEMM libraries themselves, so it includes them directly.
declare -A vendor=(
  ['cuda_runtime|cuda\.h|cublas|cuda_bf16|cuda_fp16|cuda_fp8']='backends/cuda/'
  ['nccl\.h']='comm/vendors/nccl/'
  ['ucp/api|uct/api']='comm/transports/ucx/'
  ['infiniband/verbs']='comm/topology/'
  ['cblas\.h|dnnl|libxsmm']='backends/cpu/ bench/gemm_library_bench.cpp'
)
# One grep per pattern over every file (not one per file: this runs in the test suite).
for pattern in "${!vendor[@]}"; do
  read -r -a allowed <<<"${vendor[$pattern]}"
  while IFS= read -r hit; do
    f=${hit%%:*}
    inside=0
    for prefix in "${allowed[@]}"; do [[ $f == "$prefix"* ]] && inside=1; done
    ((inside)) && continue
    echo "vendor header outside ${allowed[*]}: $hit"
    status=1
  done < <(printf '%s\0' "${files[@]}" | xargs -0 grep -EnH -m1 "^\s*#\s*include\s*[<\"]($pattern)" 2>/dev/null)
done

# clang-format names each unformatted file in its warnings ("file:line:col: error: code should
# be clang-formatted"); batches of files per process, one process per core.
if command -v clang-format >/dev/null 2>&1; then
  mapfile -t unformatted < <(printf '%s\0' "${files[@]}" | grep -zv '\.h\.in$' |
    xargs -0 -n 64 -P "$(nproc)" clang-format --dry-run -Werror 2>&1 |
    sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
  for f in "${unformatted[@]}"; do
    echo "not clang-formatted: $f (run: clang-format -i $f)"
    status=1
  done
fi

((status == 0)) && echo "source rules: ${#files[@]} files ok"
exit $status
