#!/usr/bin/env bash
# Enforces the source rules of docs/architecture.md on the tracked and untracked source files:
#   1. no source file over 800 lines;
#   2. no vendor header outside its backend's folder;
#   3. every file formatted with the repository's .clang-format (skipped if clang-format is absent).
# Prints each violation and exits 1 if there is any.
set -uo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.h' '*.hpp' '*.cpp' '*.cc' '*.cu' '*.cuh' '*.h.in' | sort -u)
status=0

for f in "${files[@]}"; do
  [[ -f $f ]] || continue
  lines=$(wc -l <"$f")
  if ((lines > 800)); then
    echo "too long: $f has $lines lines (limit 800)"
    status=1
  fi
done

# header pattern -> folder allowed to include it
declare -A vendor=(
  ['cuda_runtime|cuda\.h|cublas|cuda_bf16|cuda_fp16|cuda_fp8']='backends/cuda/'
  ['nccl\.h']='comm/vendors/nccl/'
  ['ucp/api|uct/api']='comm/transports/ucx/'
  ['infiniband/verbs']='comm/topology/'
  ['cblas\.h']='backends/cpu/'
)
for pattern in "${!vendor[@]}"; do
  allowed=${vendor[$pattern]}
  for f in "${files[@]}"; do
    [[ -f $f && $f != "$allowed"* ]] || continue
    if grep -En "^\s*#\s*include\s*[<\"]($pattern)" "$f" >/dev/null; then
      echo "vendor header outside $allowed: $f: $(grep -En "^\s*#\s*include\s*[<\"]($pattern)" "$f" | head -1)"
      status=1
    fi
  done
done

if command -v clang-format >/dev/null 2>&1; then
  for f in "${files[@]}"; do
    [[ -f $f && $f != *.h.in ]] || continue
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
      echo "not clang-formatted: $f (run: clang-format -i $f)"
      status=1
    fi
  done
fi

((status == 0)) && echo "source rules: ${#files[@]} files ok"
exit $status
