# Sourced by the benchmark drivers (run_all.sh, train_bench.sh, comm_bench.sh): helpers that
# start each run on a quiet machine and measure what other processes took during it, so that a
# shared 2-core machine yields undisturbed figures or says it could not.

# Processes whose presence means the machine is busy building (names as pgrep -x matches them:
# at most 15 characters, so each is looked up on its own).
quiet_machine_builds=(ninja make cc1plus nvcc ld cmake ctest)

# Whether one of those processes runs.
build_running() {
  local name
  for name in "${quiet_machine_builds[@]}"; do
    pgrep -x "$name" >/dev/null 2>&1 && return 0
  done
  return 1
}

# Percent of CPU time busy over the next 3 seconds (all cores).
busy_percent() {
  local a b
  read -ra a </proc/stat
  sleep 3
  read -ra b </proc/stat
  local total=0 idle=$((b[4] + b[5] - a[4] - a[5]))
  for k in 1 2 3 4 5 6 7 8; do total=$((total + b[k] - a[k])); done
  echo $((100 * (total - idle) / (total > 0 ? total : 1)))
}

# Blocks until no build runs and the CPUs are idle.
wait_quiet() {
  local waited=0
  while build_running || (($(busy_percent) > 10)); do
    ((waited++ % 12 == 0)) && echo "waiting for a quiet machine: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    sleep 10
  done
}

# Busy jiffies of all CPUs so far (user .. steal, less idle and iowait; steal counts: it is
# time another guest took from this machine).
busy_jiffies() {
  awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat
}

# The round trip of a cache line between the first two CPUs now, in ns (bench/core_link_probe.cpp;
# "-" without the probe, $core_link or build/bin/h2_bench_core_link). On the 2-vCPU guests of
# docs/performance.md it is under 250 ns while the vCPUs share a last-level cache and over it
# while they do not, the two states in which 2-thread steps differ by 17-25%.
core_link_ns() {
  local probe=${core_link:-build/bin/h2_bench_core_link} line
  line=$([[ -x $probe ]] && "$probe" 2>/dev/null) || true
  line=${line#*round trip: }
  echo "${line%% ns*}" | grep -E '^[0-9]+$' || echo -
}

# apply_max_isa LEVEL OUT_DIR: holds every later run to an older CPU's instruction set on this one
# (native: nothing; avx2 or avx512): H2 by H2_CPU_MAX_ISA, PyTorch by ATEN_CPU_CAPABILITY,
# MKL_ENABLE_INSTRUCTIONS and ONEDNN_MAX_CPU_ISA (exported), OpenBLAS by its core type, which
# quiet_run sets after clearing the environment's OpenBLAS tuning variables (an exported
# OPENBLAS_CORETYPE never reached the runs: until this helper, the capped runs' OpenBLAS loaded
# the CPU's own kernels, as H2's warning in their logs said). Writes OUT_DIR/max_isa.txt.
apply_max_isa() {
  case $1 in
    native) openblas_coretype= ;;
    avx2) export H2_CPU_MAX_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
      ONEDNN_MAX_CPU_ISA=AVX2
      openblas_coretype=Haswell ;;
    avx512) export H2_CPU_MAX_ISA=avx512 ATEN_CPU_CAPABILITY=avx512 \
      MKL_ENABLE_INSTRUCTIONS=AVX512 ONEDNN_MAX_CPU_ISA=AVX512_CORE
      openblas_coretype=SkylakeX ;;
    *) echo "MAX_ISA must be native, avx2 or avx512, not '$1'" >&2; exit 2 ;;
  esac
  {
    env | grep -E '^(H2_CPU_MAX_ISA|ATEN_CPU_CAPABILITY|MKL_ENABLE_INSTRUCTIONS|ONEDNN_MAX_CPU_ISA)=' |
      sort
    [[ -n $openblas_coretype ]] && echo "OPENBLAS_CORETYPE=$openblas_coretype (set by quiet_run)"
  } >"$2/max_isa.txt" || true
}

# quiet_run NAME STDOUT STDERR CMD...: runs CMD without the OpenBLAS tuning variables (but with
# the core type apply_max_isa chose, if any), its output into the files STDOUT and STDERR (one
# path for both is fine) and "%e %U %S %M" (wall s, user s, system s, max RSS KiB) into
# $out/NAME.time. A run during which other processes used over 5% of its wall time in CPU time
# (and over 3 clock ticks, the resolution of /proc/stat) is repeated, up to $tries times; each try
# is logged to $out/load.txt. Waits for a quiet machine first unless $quiet is 0. The core link
# (core_link_ns) before and after the kept run goes to $out/NAME.link ("BEFORE AFTER", ns) and
# every try's to load.txt, so that summaries can compare runs made in one state.
quiet_run() {
  local name=$1 stdout=$2 stderr=$3 try verdict start before after link_before link_after
  shift 3
  for ((try = 1; try <= tries; try++)); do
    ((${quiet:-1})) && wait_quiet
    link_before=$(core_link_ns)
    start=$(uptime)
    before=$(busy_jiffies)
    local pin=(${openblas_coretype:+OPENBLAS_CORETYPE=$openblas_coretype})
    if [[ $stdout == "$stderr" ]]; then
      /usr/bin/time -f "%e %U %S %M" -o "$out/$name.time" \
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${pin[@]}" "$@" >"$stdout" 2>&1
    else
      /usr/bin/time -f "%e %U %S %M" -o "$out/$name.time" \
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${pin[@]}" "$@" >"$stdout" 2>"$stderr"
    fi
    after=$(busy_jiffies)
    link_after=$(core_link_ns)
    echo "$link_before $link_after" >"$out/$name.link"
    # The last line: time(1) puts "Command exited with non-zero status N" before the figures.
    verdict=$(awk -v busy=$((after - before)) -v hz="$(getconf CLK_TCK)" 'END {
      other = busy / hz - $2 - $3
      ok = other < 0.05 * $1 || other < 3 / hz
      printf "%s %.1f s wall, %.2f CPU-s by others, max RSS %d KiB", (ok ? "ok" : "disturbed"), $1, other, $4
    }' "$out/$name.time")
    echo "$name: try $try: $verdict; load at start:${start#*load average:}; core link" \
      "$link_before/$link_after ns" >>"$out/load.txt"
    [[ $verdict == ok* ]] && return 0
  done
  echo "$name: no undisturbed run in $tries tries; keeping the last" >>"$out/load.txt"
}
