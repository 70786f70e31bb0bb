#!/usr/bin/env bash
# Communication benchmark: `h2 comm-bench` against Open MPI (bench/peers/mpi_allreduce.c, built
# as h2_peer_mpi) and ucx_perftest, same machine, same sizes, alternating runs, ROUNDS of each:
#   all_reduce f32, 8 B .. 64 MiB by 2, at each rank count in RANKS (H2, then Open MPI);
#   all_reduce f32, 8 B .. 4 KiB again with SMALL_ITERS calls per size (latency: 20 calls of a
#     0.4 us collective time the clock and one stall, not the collective), and barrier latency;
#   sendrecv 8 B latency (ring: rank r sends to r+1, receives from r-1) at each rank count;
#   ucx_perftest -t tag_lat -s 8 between two processes over shared memory (UCX_TLS=sm).
# Ranks start with `mpirun --allow-run-as-root --oversubscribe -np N`. Each run starts on a
# quiet machine and is repeated when others disturbed it (bench/quiet_machine.sh's quiet_run, up
# to TRIES times; load.txt says which). The OpenBLAS tuning variables are removed from the
# benchmark commands only. Raw tables
# go to OUT_DIR/SIDE.TEST.npN.ROUND.txt, medians to OUT_DIR/summary.md (bench/comm_summary.py).
# Usage: bench/comm_bench.sh [OUT_DIR]   (default build/comm-bench)
#   env: ROUNDS (5), BUILD (build), H2 ($BUILD/bin/h2), PEER ($BUILD/bin/h2_peer_mpi),
#        RANKS ("2 4"), SIDES ("h2 mpi ucx"; drop h2 where h2 has no comm-bench), ITERS (20),
#        WARMUP (5), SMALL_ITERS (20000), LAT_ITERS (100000), LAT_WARMUP (1000), UCX_ITERS (100000), TRIES (5),
#        QUIET (1; 0 skips waiting for a quiet machine but still logs disturbed runs)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/comm-bench}
rounds=${ROUNDS:-5}
build=${BUILD:-build}
h2=${H2:-$build/bin/h2}
peer=${PEER:-$build/bin/h2_peer_mpi}
read -ra ranks <<<"${RANKS:-2 4}"
sides=" ${SIDES:-h2 mpi ucx} "
iters=${ITERS:-20}
warmup=${WARMUP:-5}
small_iters=${SMALL_ITERS:-20000}
lat_iters=${LAT_ITERS:-100000}
lat_warmup=${LAT_WARMUP:-1000}
ucx_iters=${UCX_ITERS:-100000}
tries=${TRIES:-5}
quiet=${QUIET:-1}
mkdir -p "$out"
: >"$out/load.txt"

source bench/quiet_machine.sh

if [[ $sides == *" h2 "* ]] && ! "$h2" comm-bench --help >/dev/null 2>&1; then
  echo "$h2 has no comm-bench (built without h2_comm?); run with SIDES=\"mpi ucx\"" >&2
  exit 2
fi
if [[ $sides == *" mpi "* && ! -x $peer ]]; then
  echo "$peer is missing: build it (ninja -C $build h2_peer_mpi; needs an MPI C compiler)" >&2
  exit 2
fi

mpirun=(mpirun --allow-run-as-root --oversubscribe)

# run NAME CMD...: CMD's stdout into $out/NAME.txt, stderr into NAME.err (quiet_run).
run() {
  quiet_run "$1" "$out/$1.txt" "$out/$1.err" "${@:2}"
}

# ucx_perftest's tag latency between a server and a client on loopback, shared memory only
# (a command line for bash -c: the server in the background, the client once it listens).
ucx_tag_lat() {
  local port=$((20000 + RANDOM % 20000))
  local perftest="UCX_TLS=sm ucx_perftest -t tag_lat -s 8 -n $ucx_iters -p $port"
  echo "$perftest >/dev/null 2>&1 & sleep 1; ${perftest/ucx_perftest/ucx_perftest 127.0.0.1}; wait"
}

{
  echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "# $(mpirun --version 2>&1 | head -1); $(ucx_info -v 2>&1 | head -1 | sed 's/^# //')"
  echo "# rounds $rounds, ranks ${ranks[*]}, sides${sides% }, iters $iters, warmup $warmup, small iters $small_iters, latency iters $lat_iters"
} >"$out/machine.txt"

# pair TEST N ROUND ARGS...: `h2 comm-bench ARGS` then the MPI peer with the same ARGS, on N
# ranks, each on the sides asked for (OUT_DIR/h2.TEST.npN.ROUND.txt, mpi.TEST...).
pair() {
  local test=$1 n=$2 round=$3
  shift 3
  if [[ $sides == *" h2 "* ]]; then
    run "h2.$test.np$n.$round" "${mpirun[@]}" -np "$n" "$h2" comm-bench "$@"
  fi
  if [[ $sides == *" mpi "* ]]; then
    run "mpi.$test.np$n.$round" "${mpirun[@]}" -np "$n" "$peer" "$@"
  fi
}

for i in $(seq "$rounds"); do
  for n in "${ranks[@]}"; do
    pair allreduce "$n" "$i" all_reduce -b 8 -e 64M -f 2 -n "$iters" -w "$warmup"
    pair small "$n" "$i" all_reduce -b 8 -e 4K -f 2 -n "$small_iters" -w "$lat_warmup"
    pair barrier "$n" "$i" barrier -b 8 -e 8 -n "$small_iters" -w "$lat_warmup"
    pair sendrecv "$n" "$i" sendrecv -b 8 -e 8 -n "$lat_iters" -w "$lat_warmup"
  done
  if [[ $sides == *" ucx "* ]]; then
    run "ucx.taglat.np2.$i" bash -c "$(ucx_tag_lat)"
  fi
done

python3 bench/comm_summary.py "$out" | tee "$out/summary.md"
echo "results in $out (load log: $out/load.txt)"
