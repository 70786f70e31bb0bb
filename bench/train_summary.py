#!/usr/bin/env python3
"""Summarises bench/train_bench.sh runs: per shape, the median over runs of each side's (H2,
PyTorch eager, PyTorch compiled) tokens/s (tokens per step / median step time after the
warm-up), step ms, max RSS and, for H2, MFU (mean over the timed steps of each run, then the
median over runs); H2 against the faster PyTorch column. Then each side at the machine's full
speed: the 10th percentile of every timed step pooled over its runs; and the medians over the runs
made in each state of the core link (bench/core_link.py: whether the 2-vCPU guests of
docs/performance.md had their vCPUs on cores sharing a last-level cache, for minutes at a time;
2-thread steps differ by 17-25% between the states, and a run's median can mix them).
Usage: train_summary.py OUT_DIR SHAPE..."""
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_link import link_state  # noqa: E402


def rss_mib(path):
    return int(open(path).read().splitlines()[-1].split()[3]) / 1024  # after any time(1) note


def h2_run(jsonl, warm):
    lines = [json.loads(x) for x in open(jsonl) if x.strip()]
    steps = [x for x in lines if x.get("event") == "step" and x["step"] > warm]
    done = next(x for x in lines if x.get("event") == "done")
    ms = statistics.median(x["step_ms"] for x in steps)
    tokens = statistics.median(x["tokens_per_s"] * x["step_ms"] / 1e3 for x in steps)
    return {"tok_s": tokens / ms * 1e3, "step_ms": ms, "tokens": tokens,
            "steps_ms": [x["step_ms"] for x in steps],
            "mfu": statistics.mean(x["mfu"] for x in steps),
            "alloc_peak_mib": done["peak_mem_bytes"] / 2**20}


def torch_run(log):
    rec = json.loads([x for x in open(log) if x.startswith("{")][-1])
    return {"tok_s": rec["tokens_per_s_median_step"], "step_ms": rec["step_ms"],
            "tokens": rec["tokens_per_step"], "steps_ms": rec.get("step_ms_all", [])}


def full_speed_tok_s(runs):
    """Tokens/s at the 10th percentile of every timed step of the runs (nan without steps)."""
    steps = sorted(ms for r in runs for ms in r["steps_ms"])
    if not steps:
        return float("nan")
    return runs[0]["tokens"] / steps[int(0.1 * (len(steps) - 1))] * 1e3


def fastest(tok_s):
    """The largest of the peer columns' tokens/s, skipping columns without runs (nan)."""
    return max((v for v in tok_s.values() if v == v), default=float("nan"))


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def main():
    out, shapes = sys.argv[1], sys.argv[2:]
    print("| shape | H2 tok/s | PyTorch eager tok/s | PyTorch compiled tok/s | H2 / best PyTorch "
          "| H2 step ms | H2 MFU | H2 max RSS MiB | PyTorch max RSS MiB (eager, compiled) "
          "| H2 allocator peak MiB | runs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    runs_by_shape = {}
    for shape in shapes:
        warm = int(open(f"{out}/{shape}.warmup").read())
        h2 = []
        for j in sorted(glob.glob(f"{out}/h2.{shape}.*.jsonl")):
            r = h2_run(j, warm)
            r["rss"] = rss_mib(j[:-len(".jsonl")] + ".time")
            r["state"] = link_state(j[:-len(".jsonl")] + ".link")
            h2.append(r)
        peers = {}
        for side in ("torch", "torchc"):
            peers[side] = []
            for t in sorted(glob.glob(f"{out}/{side}.{shape}.*.log")):
                r = torch_run(t)
                r["rss"] = rss_mib(t[:-len(".log")] + ".time")
                r["state"] = link_state(t[:-len(".log")] + ".link")
                peers[side].append(r)
        runs_by_shape[shape] = (h2, peers)
        tok = {side: med(runs, "tok_s") if runs else float("nan") for side, runs in peers.items()}
        rss = {side: f"{med(runs, 'rss'):.0f}" if runs else "-" for side, runs in peers.items()}
        best = fastest(tok)
        print(f"| {shape} | {med(h2, 'tok_s'):.0f} | {tok['torch']:.0f} | {tok['torchc']:.0f} | "
              f"{med(h2, 'tok_s') / best:.2f}x | {med(h2, 'step_ms'):.1f} | "
              f"{100 * med(h2, 'mfu'):.1f}% | {med(h2, 'rss'):.0f} | "
              f"{rss['torch']}, {rss['torchc']} | {med(h2, 'alloc_peak_mib'):.0f} | "
              f"{len(h2)} + {len(peers['torch'])} + {len(peers['torchc'])} |")
    print()
    print("| shape | at full speed: H2 tok/s | PyTorch eager | PyTorch compiled "
          "| H2 / best PyTorch |")
    print("|---|---:|---:|---:|---:|")
    for shape, (h2, peers) in runs_by_shape.items():
        fast = {side: full_speed_tok_s(runs) for side, runs in peers.items()}
        best = fastest(fast)
        h2_fast = full_speed_tok_s(h2)
        print(f"| {shape} | {h2_fast:.0f} | {fast['torch']:.0f} | {fast['torchc']:.0f} | "
              f"{h2_fast / best:.2f}x |")
    print()
    print("| shape | core link (runs: H2, eager, compiled) | H2 tok/s | PyTorch eager "
          "| PyTorch compiled | H2 / best PyTorch |")
    print("|---|---|---:|---:|---:|---:|")
    for shape, (h2, peers) in runs_by_shape.items():
        for state in ("close", "distant"):
            mine = [r for r in h2 if r["state"] == state]
            theirs = {side: [r for r in runs if r["state"] == state]
                      for side, runs in peers.items()}
            if not mine:
                continue
            tok = {side: med(runs, "tok_s") if runs else float("nan")
                   for side, runs in theirs.items()}
            best = fastest(tok)
            print(f"| {shape} | {state} ({len(mine)}, {len(theirs['torch'])}, "
                  f"{len(theirs['torchc'])}) | {med(mine, 'tok_s'):.0f} | {tok['torch']:.0f} | "
                  f"{tok['torchc']:.0f} | {med(mine, 'tok_s') / best:.2f}x |")
    print()
    for shape in shapes:
        for side in ("h2", "torch", "torchc"):
            files = sorted(glob.glob(f"{out}/{side}.{shape}.*.time"))
            print(f"{shape} {side} max RSS per run (MiB): "
                  + ", ".join(f"{rss_mib(f):.0f}" for f in files))


if __name__ == "__main__":
    main()
