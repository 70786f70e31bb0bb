# Sourced by the benchmark drivers (run_all.sh, train_bench.sh): helpers that start each run on a
# quiet machine and measure what other processes took during it, so that a shared 2-core machine
# yields undisturbed figures or says it could not.

# Processes whose presence means the machine is busy building.
quiet_machine_builds='ninja|make|cc1plus|nvcc|ld|cmake|ctest'

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
  while pgrep -x "$quiet_machine_builds" >/dev/null 2>&1 || (($(busy_percent) > 10)); do
    ((waited++ % 12 == 0)) && echo "waiting for a quiet machine: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    sleep 10
  done
}

# Busy jiffies of all CPUs so far (user .. steal, less idle and iowait; steal counts: it is
# time another guest took from this machine).
busy_jiffies() {
  awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat
}
