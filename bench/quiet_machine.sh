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

# quiet_run NAME STDOUT STDERR CMD...: runs CMD without the OpenBLAS tuning variables, its output
# into the files STDOUT and STDERR (one path for both is fine) and "%e %U %S %M" (wall s, user s,
# system s, max RSS KiB) into $out/NAME.time. A run during which other processes used over 5% of
# its wall time in CPU time (and over 3 clock ticks, the resolution of /proc/stat) is repeated, up
# to $tries times; each try is logged to $out/load.txt. Waits for a quiet machine first unless
# $quiet is 0.
quiet_run() {
  local name=$1 stdout=$2 stderr=$3 try verdict start before after
  shift 3
  for ((try = 1; try <= tries; try++)); do
    ((${quiet:-1})) && wait_quiet
    start=$(uptime)
    before=$(busy_jiffies)
    if [[ $stdout == "$stderr" ]]; then
      /usr/bin/time -f "%e %U %S %M" -o "$out/$name.time" \
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@" >"$stdout" 2>&1
    else
      /usr/bin/time -f "%e %U %S %M" -o "$out/$name.time" \
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@" >"$stdout" 2>"$stderr"
    fi
    after=$(busy_jiffies)
    # The last line: time(1) puts "Command exited with non-zero status N" before the figures.
    verdict=$(awk -v busy=$((after - before)) -v hz="$(getconf CLK_TCK)" 'END {
      other = busy / hz - $2 - $3
      ok = other < 0.05 * $1 || other < 3 / hz
      printf "%s %.1f s wall, %.2f CPU-s by others, max RSS %d KiB", (ok ? "ok" : "disturbed"), $1, other, $4
    }' "$out/$name.time")
    echo "$name: try $try: $verdict; load at start:${start#*load average:}" >>"$out/load.txt"
    [[ $verdict == ok* ]] && return 0
  done
  echo "$name: no undisturbed run in $tries tries; keeping the last" >>"$out/load.txt"
}
