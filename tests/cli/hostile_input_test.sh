#!/usr/bin/env bash
# Hostile and careless input to `h2 train` and `h2 generate` (issue 17's cases): each is refused
# before any training work with an exit code of 2 and a message that names the bad value, and
# nothing is lost: a checkpoint folder that is a file, an unwritable trace file with
# checkpoint.every 0, a second trainer on a folder in use, a checkpoint past train.steps, a
# corrupted trainer.json, data that is a device, a 48 MB config, a model or batch far too large
# (refused within 2x the memory of a plain refusal), a NaN temperature; and a plan file's
# malformed replicas (h2 plan --evaluate).
# Usage: hostile_input_test.sh H2_BINARY REPO_ROOT
set -euo pipefail
h2=$1
root=$2
tiny=$root/configs/train/tiny.yaml
work=$(mktemp -d)
first=""
trap '[[ -n $first ]] && kill $first 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"

# measured RSS_FILE COMMAND...: runs COMMAND and writes its peak resident set (KiB) to RSS_FILE.
measured() {
  /usr/bin/python3 -c '
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)' "$@"
}

# expect_refusal NAME WANTED_TEXT COMMAND...: exit 2, the text in stderr, no training step run,
# and nothing allocated for the bad request: the peak resident set stays within 2x that of the
# first refusal (a config read and refused, about 30 MB), whatever the request would have needed.
baseline_kib=""
expect_refusal() {
  local name=$1 wanted=$2
  shift 2
  set +e
  measured rss.txt "$@" >out.log 2>err.log
  local code=$?
  set -e
  if [[ $code -ne 2 ]] || ! grep -qF -- "$wanted" err.log || grep -q "^step " out.log; then
    echo "$name: exit $code (want 2), stderr: $(cat err.log), stdout: $(tail -2 out.log)"
    exit 1
  fi
  local rss
  rss=$(cat rss.txt)
  [[ -n $baseline_kib ]] || baseline_kib=$rss
  if ((rss > 2 * baseline_kib)); then
    echo "$name: refused at a peak of $rss KiB, more than 2x the first refusal's $baseline_kib KiB"
    exit 1
  fi
}
quick=(--set train.steps=3 --set train.eval_every=0 --set log.metrics_file=m.jsonl)

touch a-file
expect_refusal "checkpoint.dir is a file" "cannot use 'a-file' as the checkpoint folder" \
  "$h2" train "$tiny" "${quick[@]}" --set checkpoint.dir=a-file
expect_refusal "unwritable trace file" "cannot write '/proc/h2-none/trace.json'" \
  "$h2" train "$tiny" "${quick[@]}" --set checkpoint.dir=ck --set checkpoint.every=0 \
  --set log.trace_file=/proc/h2-none/trace.json
expect_refusal "unwritable metrics file" "cannot write 'a-file/m.jsonl'" \
  "$h2" train "$tiny" "${quick[@]}" --set log.metrics_file=a-file/m.jsonl
expect_refusal "dry run, checkpoint.dir a file" "'a-file' exists and is not a folder" \
  "$h2" train "$tiny" --set checkpoint.dir=a-file --dry-run

# A second trainer on a folder in use is refused naming the first (which keeps running).
"$h2" train "$tiny" --set train.steps=100000 --set log.every=1 --set checkpoint.dir=busy \
  --set log.metrics_file=busy.jsonl >first.log 2>&1 &
first=$!
for _ in $(seq 100); do grep -q "^step " first.log && break; sleep 0.2; done
grep -q "^step " first.log || { echo "the first trainer did not start: $(cat first.log)"; exit 1; }
expect_refusal "second trainer" "in use by another h2 train (pid $first" \
  "$h2" train "$tiny" "${quick[@]}" --set checkpoint.dir=busy
kill -0 $first || { echo "the first trainer died"; exit 1; }
kill $first && wait $first || true
first=""

# A checkpoint at step 3: resuming with fewer steps, or from a corrupted trainer.json, is refused;
# resuming at exactly train.steps has nothing to do and says so.
"$h2" train "$tiny" "${quick[@]}" --set checkpoint.dir=ck3 >/dev/null
expect_refusal "train.steps below the checkpoint" "is at step 3, past train.steps 2" \
  "$h2" train "$tiny" "${quick[@]}" --set checkpoint.dir=ck3 --set checkpoint.resume=true \
  --set train.steps=2
"$h2" train "$tiny" "${quick[@]}" --set checkpoint.dir=ck3 --set checkpoint.resume=true >same.log
grep -q "nothing to train: ck3/step_000003 is at train.steps (3)" same.log &&
  ! grep -q "tok/s" same.log || { echo "resume at train.steps said: $(cat same.log)"; exit 1; }
sed -i 's/"step": 3/"step": 1000000000000/' ck3/step_000003/trainer.json
expect_refusal "corrupted trainer.json" "trainer.json: corrupted" \
  "$h2" train "$tiny" "${quick[@]}" --set checkpoint.dir=ck3 --set checkpoint.resume=true \
  --set train.steps=5

# Inputs that would read forever or for minutes are refused at once.
expect_refusal "data from a device" "'/dev/zero' is not a regular file" \
  "$h2" train "$tiny" "${quick[@]}" --set data.path=/dev/zero
head -c 48000000 /dev/zero | tr '\0' 'a' >big.yaml
expect_refusal "48 MB config" "is 48000000 bytes; such files are at most" "$h2" train big.yaml
expect_refusal "plan from a device" "parallel.plan '/dev/zero' is not a regular file" \
  "$h2" train "$tiny" --set parallel.mode=pipeline --set parallel.plan=/dev/zero

# A model that cannot fit is refused with the estimate before anything is allocated; a layer
# count past the key's range (2^20, so that the plan's int arithmetic cannot overflow) at once.
expect_refusal "1M layers" "need about" "$h2" train "$tiny" --set model.n_layers=1000000
expect_refusal "100M layers" "model.n_layers = 100000000 is out of range" \
  "$h2" train "$tiny" --set model.n_layers=100000000
expect_refusal "a 4 GiB width" "need about" \
  "$h2" train "$tiny" --set model.dim=4294967328
expect_refusal "2e9 vocabulary" "need about" "$h2" train "$tiny" --set model.vocab_size=2000000000
expect_refusal "1e8 batch" "need about" "$h2" train "$tiny" --set train.batch_size=100000000
# Sizes whose products pass int64: the estimate saturates instead of wrapping into a figure that
# fits (a 1.5e18 SwiGLU width passed it and failed in a shape check naming no key), and a
# micro-batch's tokens, which the trainer's buffers multiply out, are bounded (2^60 sequences
# wrapped to 0 tokens and crashed training).
expect_refusal "a 1.5e18 SwiGLU width" "need about" \
  "$h2" train "$tiny" --set model.ffn_dim=1537228672809129302
expect_refusal "2^60 batch" "tokens a micro-batch, beyond 2^40" \
  "$h2" train "$tiny" --set train.batch_size=1152921504606846976

# A plan file's replicas are read through the key table: 'x2' is named with the file's line
# (it was a bare "h2: error: stoll"), as in h2 plan --evaluate and h2 simulate --plan.
printf 'replicas: x2\nstages:\n  - {layers: 0-3, chip: "vchip:chip-a", ranks: [0]}\n' >bad-plan.yaml
expect_refusal "plan replicas x2" "bad-plan.yaml:1: parallel.replicas = 'x2' is not an integer" \
  "$h2" plan --datasheet --cluster "$root/configs/clusters/mixed-4.yaml" --profiles profiles \
  --evaluate bad-plan.yaml "$root/configs/train/hetero-4.yaml"

# A job on one machine exposes nothing: every TCP listener of its ranks (store, UCX data plane)
# is on a loopback address (the sockets of each rank read from /proc, no extra tools).
"$(dirname "$h2")/h2run" -n 2 -- "$h2" train "$tiny" --set parallel.mode=dp --set train.steps=100000 \
  --set log.every=1 --set checkpoint.dir= --set log.metrics_file= >job.log 2>&1 &
first=$!
for _ in $(seq 100); do grep -q "step " job.log && break; sleep 0.2; done
grep -q "step " job.log || { echo "the 2-rank job did not start: $(cat job.log)"; exit 1; }
listeners=$(for pid in $(pgrep -P $first); do
  for fd in /proc/$pid/fd/*; do readlink "$fd"; done 2>/dev/null | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p'
done | /usr/bin/python3 -c '
import sys
inodes = set(sys.stdin.read().split())
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for row in open(table).read().splitlines()[1:]:
        f = row.split()
        if f[3] == "0A" and f[9] in inodes:  # LISTEN
            print(f[1].split(":")[0])
')
[[ -n $listeners ]] || { echo "found no listener of the job's ranks"; exit 1; }
for address in $listeners; do  # 127.x.x.x in /proc's byte order, or ::1
  [[ $address == *7F || $address == 00000000000000000000000001000000 ]] ||
    { echo "a rank listens on a non-loopback address ($address; all: $listeners)"; exit 1; }
done
kill $first && wait $first || true
first=""

# A hung rank (SIGSTOP) in a pipeline: the error names the training step (not the collective's
# internal round) and the hung rank, within the timeout.
H2_COMM_TIMEOUT=3 "$(dirname "$h2")/h2run" -n 2 --grace 2 -- "$h2" train "$tiny" \
  --set parallel.mode=pipeline --set train.steps=100000 --set log.every=1 --set checkpoint.dir= \
  --set log.metrics_file= >hung.log 2>&1 &
first=$!
for _ in $(seq 100); do grep -q "step  *5/" hung.log && break; sleep 0.2; done
for pid in $(pgrep -P $first); do
  grep -qz '^H2_RANK=1$' /proc/$pid/environ && kill -STOP $pid
done
wait $first || true
first=""
grep -Eq "error: step ([6-9]|[1-9][0-9]+): .*rank 1 died, hangs" hung.log ||
  { echo "a hung rank's error: $(grep error hung.log)"; exit 1; }

# An MFU above 100% (a peak set too low) is explained once, not shown silently.
H2_CPU_PEAK_GFLOPS=1 "$h2" train "$tiny" "${quick[@]}" --set train.steps=20 --set log.every=5 \
  --set checkpoint.dir= >mfu.log
[[ $(grep -c "warning: mfu .* is above 100%" mfu.log) -eq 1 ]] ||
  { echo "MFU above 100% not explained once: $(cat mfu.log)"; exit 1; }

# generate: NaN and infinite temperatures are not numbers >= 0.
"$h2" train "$tiny" "${quick[@]}" --set checkpoint.dir=gen >/dev/null
for t in nan inf -1; do
  set +e
  "$h2" generate gen --temperature $t --tokens 3 >out.log 2>err.log
  code=$?
  set -e
  [[ $code -ne 0 ]] && grep -q "temperature" err.log ||
    { echo "generate --temperature $t: exit $code, $(cat err.log)"; exit 1; }
done
echo "hostile input: all refused"
