#!/usr/bin/env bash
# Builds and runs the libFuzzer targets of fuzz/ (fuzz/README.md): H2's parsers of untrusted input
# (training configs, plan, chip and cluster files, safetensors, Hugging Face folders, checkpoint
# manifests, token files, the store's wire frames, chip profiles) under ASan and UBSan.
#
# Usage: tools/fuzz.sh [--seconds N] [--jobs J] [--keep-going] [--quick-build] [target...]
#                     [-- libFuzzer flags...]
#   --seconds N  fuzzing time per target (default 20)
#   --quick-build  build with -O0 -gline-tables-only (H2_FUZZ_OPT_FLAGS; default -O1 -g): half
#                the build time for a short run, fewer executions per second
#   --jobs J     targets fuzzed at once (default 1); the build uses $H2_FUZZ_BUILD_JOBS or all cores
#   --keep-going go on after a finding (libFuzzer -fork=1 -ignore_crashes=1 ...), to collect
#                several findings per target in one run; the default stops a target at its first
#   target       names as in fuzz/NAME_fuzzer.cpp (default: all), e.g. safetensors plan_file
# Environment: H2_FUZZ_BUILD_DIR (default build-fuzz), H2_FUZZ_IGNORE (fuzz/fuzz_common.h),
# ASAN_OPTIONS / UBSAN_OPTIONS (defaults below).
# Configures build-fuzz (clang, CUDA/NCCL/tests/benchmarks off, -DH2_FUZZ=ON) once, then builds
# incrementally only the fuzz targets (ninja h2_fuzzers). Each target runs on its seeds in
# fuzz/corpus/NAME (read only) plus build-fuzz/corpus/NAME, where new inputs go and stay for the
# next run; -max_len=65536 -timeout=10 -rss_limit_mb=2048, fuzz/dict/NAME.dict when present.
# Findings land in build-fuzz/findings/NAME/ (crash-*, leak-*, timeout-*, oom-*); for each the
# script prints the file and the command that reproduces it, and exits 1. Logs:
# build-fuzz/logs/NAME.log. Exit 0: no finding; 1: findings; 2: usage or build error.
#
# Tiers (measured here: 2 cores, build at -j2):
#   CI, every change:  scripts/test.sh runs tools/fuzz.sh --seconds 10 --jobs 2 --quick-build:
#                      the -O1 -g build took 4-5.5 min (75 instrumented files) and the whole
#                      phase 315 s in CI (session 28); the quick build 169 s here, alone; the
#                      run 10 s per target, two at a time.
#   By hand, default flags: tools/fuzz.sh   (20 s per target; a rebuild after a parser change
#                      1-2 min)
#   By hand, before a release or after touching a parser:
#                      tools/fuzz.sh --seconds 600 [target...]   (the corpus grows between runs)
# Run it niced where others build (nice -n 10 tools/fuzz.sh): every process it starts inherits that.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${H2_FUZZ_BUILD_DIR:-build-fuzz}

seconds=20
jobs=1
opt_flags="-O1 -g"
keep_going=0
targets=()
extra=()
while (($#)); do
  case $1 in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a value}; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    --quick-build) opt_flags="-O0 -gline-tables-only"; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ && $jobs =~ ^[1-9][0-9]*$ ]] ||
  { echo "fuzz.sh: --seconds and --jobs take whole numbers" >&2; exit 2; }

all=()
for f in fuzz/*_fuzzer.cpp; do all+=("$(basename "$f" _fuzzer.cpp)"); done
((${#targets[@]})) || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: no target '$t' (targets: ${all[*]})" >&2; exit 2; }
done

# Build: configure once, then ninja rebuilds what changed (and reconfigures if CMake files did).
start=$(date +%s)
configured_flags=$(sed -n 's/^H2_FUZZ_OPT_FLAGS:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
if [[ ! -f $BUILD/build.ninja || $configured_flags != "$opt_flags" ]]; then
  command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/install_deps.sh)" >&2; exit 2; }
  configure_log=$(mktemp)
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG= -DH2_WITH_CUDA=OFF -DH2_WITH_NCCL=OFF -DH2_BUILD_TESTS=OFF \
    -DH2_BUILD_BENCH=OFF -DH2_FUZZ=ON -DH2_FUZZ_OPT_FLAGS="$opt_flags" \
    >"$configure_log" 2>&1 ||
    { cat "$configure_log" >&2; rm -f "$configure_log"; echo "fuzz.sh: configure failed" >&2; exit 2; }
  mv "$configure_log" "$BUILD/configure.log"
fi
ninja -C "$BUILD" -j "${H2_FUZZ_BUILD_JOBS:-$(nproc)}" h2_fuzzers || { echo "fuzz.sh: build failed" >&2; exit 2; }
echo "fuzz.sh: build took $(($(date +%s) - start)) s"

# A scratch folder for the targets that read paths (fuzz/fuzz_common.h), removed at the end.
export H2_FUZZ_TMPDIR=/dev/shm/h2-fuzz-run-$$
trap 'rm -rf "$H2_FUZZ_TMPDIR"' EXIT
symbolizer=$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 || true)
[[ -n $symbolizer ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_target() {
  local t=$1 bin=$BUILD/fuzz/bin/$1_fuzzer
  local work=$BUILD/corpus/$t findings=$BUILD/findings/$t log=$BUILD/logs/$t.log
  mkdir -p "$work" "$findings" "$(dirname "$log")"
  local flags=(-max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048
    -print_final_stats=1 -artifact_prefix="$findings/")
  [[ -f fuzz/dict/$t.dict ]] && flags+=(-dict="fuzz/dict/$t.dict")
  ((keep_going)) && flags+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  # New inputs go to the first folder; the seeds folder is only read.
  "$bin" "${flags[@]}" "${extra[@]}" "$work" "fuzz/corpus/$t" >"$log" 2>&1
}

# One line per target from its log: executions, their rate and the coverage reached (libFuzzer's
# last "cov:" line; with --keep-going the parent's "#N: cov: ..." lines).
summary() {
  local t=$1 log=$BUILD/logs/$1.log
  local last execs rate
  last=$(grep -E '^#[0-9]+:?[[:space:]].*cov: ' "$log" | tail -1)
  execs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  rate=$(grep -oE 'stat::average_exec_per_sec: +[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  [[ -z $execs ]] && execs=$(grep -oE '^#[0-9]+' <<<"$last" | tr -d '#')
  [[ -z $rate ]] && rate=$(grep -oE 'exec/s:? [0-9]+' <<<"$last" | grep -oE '[0-9]+$')
  printf '%-15s %-8s execs %-9s exec/s %-7s %s\n' "$t" "$2" "${execs:--}" "${rate:--}" \
    "$(grep -oE 'cov: [0-9]+ ft: [0-9]+' <<<"$last")"
}

marker=$(mktemp)
trap 'rm -rf "$H2_FUZZ_TMPDIR" "$marker"' EXIT
declare -A status
running=0
for t in "${targets[@]}"; do
  echo "fuzz.sh: fuzzing $t for $seconds s"
  if ((jobs == 1)); then
    run_target "$t"
    status[$t]=$?
  else
    (run_target "$t"; echo $? >"$BUILD/logs/$t.rc") &
    ((++running >= jobs)) && { wait -n; ((running--)); }
  fi
done
wait
if ((jobs > 1)); then
  for t in "${targets[@]}"; do status[$t]=$(cat "$BUILD/logs/$t.rc" 2>/dev/null || echo 1); done
fi

echo
found=0
for t in "${targets[@]}"; do
  new=$(find "$BUILD/findings/$t" -maxdepth 1 -type f -newer "$marker" \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
  if [[ ${status[$t]} -ne 0 || -n $new ]]; then
    summary "$t" FINDING
    found=1
    if [[ -z $new ]]; then
      echo "  exit status ${status[$t]} without a finding file; see $BUILD/logs/$t.log"
    fi
    shown=0
    for f in $new; do
      if ((++shown > 10)); then
        echo "  ... and $(($(wc -w <<<"$new") - 10)) more in $BUILD/findings/$t/"
        break
      fi
      echo "  input:     $f"
      echo "  reproduce: $BUILD/fuzz/bin/${t}_fuzzer $f"
      timeout 120 "$BUILD/fuzz/bin/${t}_fuzzer" -timeout=10 -rss_limit_mb=2048 "$f" 2>&1 |
        grep -m2 -E 'ERROR: |runtime error:|terminate called|what\(\):|invariant violated' |
        cut -c1-300 | sed 's/^/  report:    /'
    done
  else
    summary "$t" ok
  fi
done
if ((found)); then
  echo "fuzz.sh: findings above (logs in $BUILD/logs/; inputs in $BUILD/findings/)"
  exit 1
fi
echo "fuzz.sh: no findings"
