#!/usr/bin/env python3
"""Soak: a 4-rank pipeline job under `h2run --max-restarts` while a random rank is killed.

What it proves (issue 17's acceptance): a job whose ranks are killed with SIGKILL every 1-3
minutes for half an hour restarts from its newest checkpoint each time and ends with the
uninterrupted run's losses, step by step, and leaves nothing behind: no process of the job, no
listening socket, no H2 shared-memory segment of its processes, nothing in its temporary folder
(TMPDIR), no half-written checkpoint.

    tools/soak.py [--minutes 30] [--kill-every 60 180] [--steps 10000] [--work runs/soak]

It runs the uninterrupted reference first (the same command, no kills), then the soak job; the
kill phase lasts --minutes or until the job ends (the script then says how long it lasted: give
the job enough --steps that it outlasts the kill phase). Standard library only; needs a built
build/bin/h2 and build/bin/h2run (--build). Exit 0 when every check holds, 1 otherwise.

Run it beside other work with `nice`: the checks compare losses, not times, and the job's
communication timeout is raised (H2_COMM_TIMEOUT=300) so that a loaded machine does not fail it.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RANKS = 4


def job_command(build: Path, work: Path, steps: int, restarts: int) -> list:
    """h2run -n 4 running the README's mixed-cluster pipeline (configs/train/hetero-4.yaml)."""
    sets = {
        "train.steps": steps,
        "train.eval_every": 500,
        "log.every": 1,
        "checkpoint.every": 100,
        "checkpoint.keep_last": 2,
        "checkpoint.dir": work / "ckpt",
        "log.metrics_file": work / "metrics.jsonl",
    }
    command = [str(build / "bin/h2run"), "-n", str(RANKS), "--max-restarts", str(restarts), "--"]
    command += [str(build / "bin/h2"), "train", str(ROOT / "configs/train/hetero-4.yaml")]
    for key, value in sets.items():
        command += ["--set", f"{key}={value}"]
    return command


def job_env(token: str, tmp: Path) -> dict:
    """The job's environment: its token, a generous timeout, and a temporary folder of its own
    (TMPDIR), which must be empty when the job is over."""
    env = dict(os.environ)
    env.update({"H2_JOB_TOKEN": token, "H2_COMM_TIMEOUT": "300", "UCX_WARN_UNUSED_ENV_VARS": "n",
                "TMPDIR": str(tmp)})
    return env


def losses(metrics: Path) -> dict:
    """(event, step) -> loss, the last record of each winning (a redone step rewrites it)."""
    out = {}
    for line in metrics.read_text().splitlines():
        record = json.loads(line)
        if record.get("event") in ("step", "eval") and "loss" in record:
            out[(record["event"], record["step"])] = record["loss"]
    return out


def environ_of(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def job_pids(token: str) -> dict:
    """pid -> rank (-1 for h2run itself) of every live process carrying the job's token."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        env = environ_of(entry.name)
        if f"H2_JOB_TOKEN={token}\0".encode() not in env:
            continue
        rank = -1
        for var in env.split(b"\0"):
            if var.startswith(b"H2_RANK="):
                rank = int(var[len(b"H2_RANK="):] or -1)
        found[int(entry.name)] = rank
    return found


def listening_sockets() -> set:
    """Inodes of listening TCP sockets (IPv4 and IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                inodes.add(fields[9])
    return inodes


def shared_memory_of(pids: set) -> list:
    """H2's shared-memory segments (/dev/shm/h2.<first rank's pid>.<hash>) of these processes."""
    found = []
    for name in os.listdir("/dev/shm"):
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "h2" and parts[1].isdigit() and int(parts[1]) in pids:
            found.append("/dev/shm/" + name)
    return found


class PidWatch:
    """Every process that carried the job's token while the job ran, sampled every second."""

    def __init__(self, token: str):
        self.token, self.pids, self.stop = token, set(), threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stop.wait(1.0):
            self.pids.update(job_pids(self.token))

    def finish(self) -> set:
        self.stop.set()
        self.thread.join()
        return self.pids


def checkpoint_debris(ckpt: Path) -> list:
    """Temporary step folders and step folders without a manifest."""
    bad = []
    for entry in sorted(ckpt.iterdir()) if ckpt.is_dir() else []:
        if entry.name.startswith(".tmp") or (entry.is_dir() and not (entry / "manifest.json").exists()):
            bad.append(str(entry))
    return bad


def run_reference(args, work: Path, tmp: Path) -> float:
    start = time.monotonic()
    result = subprocess.run(job_command(args.build, work, args.steps, 0),
                            env=job_env(f"soak-reference-{os.getpid()}", tmp),
                            stdout=(work / "stdout.txt").open("w"),
                            stderr=(work / "stderr.txt").open("w"))
    if result.returncode != 0:
        sys.exit(f"soak.py: the reference run failed (exit {result.returncode}); see {work}/stderr.txt")
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30, help="length of the kill phase")
    parser.add_argument("--kill-every", type=float, nargs=2, default=(60, 180), metavar=("MIN", "MAX"),
                        help="seconds between kills, drawn uniformly")
    parser.add_argument("--steps", type=int, default=10000,
                        help="training steps of both runs (about 0.17 s each on 2 cores)")
    parser.add_argument("--work", type=Path, default=ROOT / "runs/soak", help="output folder (emptied)")
    parser.add_argument("--build", type=Path, default=ROOT / "build", help="build folder")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill schedule")
    args = parser.parse_args()
    for binary in ("bin/h2", "bin/h2run"):
        if not (args.build / binary).exists():
            sys.exit(f"soak.py: {args.build / binary} not found (build first, or --build DIR)")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    subprocess.run(["rm", "-rf", str(args.work)], check=True)
    reference, soak = args.work / "reference", args.work / "soak"
    tmp = args.work / "tmp"
    for folder in (reference, soak, tmp):
        folder.mkdir(parents=True)

    sockets_before = listening_sockets()
    print(f"soak.py: reference run, {args.steps} steps ...", flush=True)
    reference_s = run_reference(args, reference, tmp)
    print(f"soak.py: reference took {reference_s / 60:.1f} min", flush=True)

    token = f"soak-{os.getpid()}-{seed}"
    start = time.monotonic()
    job = subprocess.Popen(job_command(args.build, soak, args.steps, 1000), env=job_env(token, tmp),
                           stdout=(soak / "stdout.txt").open("w"), stderr=(soak / "stderr.txt").open("w"))
    watch = PidWatch(token)
    kills = []
    stop = threading.Event()

    def killer():
        while not stop.is_set() and time.monotonic() - start < args.minutes * 60:
            if stop.wait(rng.uniform(*args.kill_every)):
                return
            ranks = {rank: pid for pid, rank in job_pids(token).items() if rank >= 0}
            if not ranks:
                continue  # between attempts
            rank = rng.choice(sorted(ranks))
            os.kill(ranks[rank], signal.SIGKILL)
            done = losses(soak / "metrics.jsonl") if (soak / "metrics.jsonl").exists() else {}
            step = max((s for e, s in done if e == "step"), default=0)
            kills.append((time.monotonic() - start, rank, step))
            print(f"soak.py: {kills[-1][0] / 60:5.1f} min: killed rank {rank} (pid {ranks[rank]}) "
                  f"after step {step}", flush=True)

    thread = threading.Thread(target=killer)
    thread.start()
    code = job.wait()
    stop.set()
    thread.join()
    seen = watch.finish()
    soak_s = time.monotonic() - start
    time.sleep(2)  # the kernel closes a dead process's sockets at once; give stragglers a moment

    failures = []
    if code != 0:
        failures.append(f"the soak job exited {code} (see {soak}/stderr.txt)")
    want, got = losses(reference / "metrics.jsonl"), losses(soak / "metrics.jsonl")
    worst = 0.0
    for key, loss in want.items():
        if key not in got:
            failures.append(f"{key[0]} {key[1]}: no loss in the soak run")
            continue
        worst = max(worst, abs(got[key] - loss) / max(abs(loss), 1e-12))
    if worst > 1e-5:
        failures.append(f"losses differ from the reference by up to {worst:.2e} relative (allowed 1e-5)")
    restarts = (soak / "stderr.txt").read_text().count("restarting the job")
    if restarts != len(kills):
        failures.append(f"{len(kills)} kills but {restarts} restarts")
    alive = job_pids(token)
    if alive:
        failures.append(f"processes of the job still alive: {sorted(alive)}")
    new_sockets = listening_sockets() - sockets_before
    if new_sockets:  # (another program's listener would show here too: the log names them)
        failures.append(f"{len(new_sockets)} listening sockets more than before the runs")
    segments = shared_memory_of(seen)
    if segments:
        failures.append(f"shared memory left behind: {segments}")
    temporary = sorted(str(p) for p in tmp.iterdir())
    if temporary:
        failures.append(f"temporary files left behind: {temporary}")
    for run in (reference, soak):
        debris = checkpoint_debris(run / "ckpt")
        if debris:
            failures.append(f"checkpoint debris: {debris}")

    final = max(s for e, s in want if e == "step")
    print(f"soak.py: seed {seed}; reference {reference_s / 60:.1f} min; soak {soak_s / 60:.1f} min "
          f"({len(seen)} processes seen) "
          f"with {len(kills)} kills (ranks {[k[1] for k in kills]}) and {restarts} restarts; "
          f"final loss {got.get(('step', final), float('nan')):.6f} vs {want[('step', final)]:.6f}; "
          f"{len(want)} losses compared, worst relative difference {worst:.2e}")
    if soak_s < args.minutes * 60:
        print(f"soak.py: note: the job ended after {soak_s / 60:.1f} of the {args.minutes:g} "
              "minutes asked for: give it more --steps", flush=True)
    for failure in failures:
        print(f"soak.py: FAIL: {failure}")
    print("soak.py: " + ("passed" if not failures else f"{len(failures)} checks failed"))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
