#!/usr/bin/env python3
"""Summarises bench/train_bench.sh runs: per shape, the median over runs of each side's (H2,
PyTorch eager, PyTorch compiled) tokens/s (tokens per step / median step time after the
warm-up), step ms, max RSS and, for H2, MFU (mean over the timed steps of each run, then the
median over runs); H2 against the faster PyTorch column.
Usage: train_summary.py OUT_DIR SHAPE..."""
import glob
import json
import statistics
import sys


def rss_mib(path):
    return int(open(path).read().splitlines()[-1].split()[3]) / 1024  # after any time(1) note


def h2_run(jsonl, warm):
    lines = [json.loads(x) for x in open(jsonl) if x.strip()]
    steps = [x for x in lines if x.get("event") == "step" and x["step"] > warm]
    done = next(x for x in lines if x.get("event") == "done")
    ms = statistics.median(x["step_ms"] for x in steps)
    tokens = statistics.median(x["tokens_per_s"] * x["step_ms"] / 1e3 for x in steps)
    return {"tok_s": tokens / ms * 1e3, "step_ms": ms,
            "mfu": statistics.mean(x["mfu"] for x in steps),
            "alloc_peak_mib": done["peak_mem_bytes"] / 2**20}


def torch_run(log):
    rec = json.loads([x for x in open(log) if x.startswith("{")][-1])
    return {"tok_s": rec["tokens_per_s_median_step"], "step_ms": rec["step_ms"]}


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def main():
    out, shapes = sys.argv[1], sys.argv[2:]
    print("| shape | H2 tok/s | PyTorch eager tok/s | PyTorch compiled tok/s | H2 / best PyTorch "
          "| H2 step ms | H2 MFU | H2 max RSS MiB | PyTorch max RSS MiB (eager, compiled) "
          "| H2 allocator peak MiB | runs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shape in shapes:
        warm = int(open(f"{out}/{shape}.warmup").read())
        h2 = []
        for j in sorted(glob.glob(f"{out}/h2.{shape}.*.jsonl")):
            r = h2_run(j, warm)
            r["rss"] = rss_mib(j[:-len(".jsonl")] + ".time")
            h2.append(r)
        peers = {}
        for side in ("torch", "torchc"):
            peers[side] = []
            for t in sorted(glob.glob(f"{out}/{side}.{shape}.*.log")):
                r = torch_run(t)
                r["rss"] = rss_mib(t[:-len(".log")] + ".time")
                peers[side].append(r)
        tok = {side: med(runs, "tok_s") if runs else float("nan") for side, runs in peers.items()}
        rss = {side: f"{med(runs, 'rss'):.0f}" if runs else "-" for side, runs in peers.items()}
        best = max((v for v in tok.values() if v == v), default=float("nan"))
        print(f"| {shape} | {med(h2, 'tok_s'):.0f} | {tok['torch']:.0f} | {tok['torchc']:.0f} | "
              f"{med(h2, 'tok_s') / best:.2f}x | {med(h2, 'step_ms'):.1f} | "
              f"{100 * med(h2, 'mfu'):.1f}% | {med(h2, 'rss'):.0f} | "
              f"{rss['torch']}, {rss['torchc']} | {med(h2, 'alloc_peak_mib'):.0f} | "
              f"{len(h2)} + {len(peers['torch'])} + {len(peers['torchc'])} |")
    print()
    for shape in shapes:
        for side in ("h2", "torch", "torchc"):
            files = sorted(glob.glob(f"{out}/{side}.{shape}.*.time"))
            print(f"{shape} {side} max RSS per run (MiB): "
                  + ", ".join(f"{rss_mib(f):.0f}" for f in files))


if __name__ == "__main__":
    main()
