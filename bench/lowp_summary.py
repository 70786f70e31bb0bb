#!/usr/bin/env python3
"""Summarises bench/lowp_bench.sh: per run name, the median over rounds of the median step time
after the warm-up, tokens/s, and the ratio to H2's bf16 step time; then the PyTorch peer rows
(torch_f32, torch_bf16) where they exist.
Usage: lowp_summary.py OUT_DIR NAME..."""
import glob
import json
import statistics
import sys


def median_step_ms(jsonl, warm):
    lines = [json.loads(x) for x in open(jsonl) if x.strip()]
    steps = [x for x in lines if x.get("event") == "step" and x["step"] > warm]
    tokens = steps[0]["tokens_per_s"] * steps[0]["step_ms"] / 1e3
    return statistics.median(x["step_ms"] for x in steps), tokens


def torch_step_ms(log):
    record = json.loads([x for x in open(log) if x.startswith("{")][-1])
    return record["step_ms"], record["tokens_per_step"]


def main():
    out, names = sys.argv[1], sys.argv[2:]
    warm = int(open(f"{out}/warmup").read())
    ms = {}
    for name in names:
        runs = [median_step_ms(j, warm) for j in sorted(glob.glob(f"{out}/{name}.*.jsonl"))]
        if runs:
            ms[f"H2 {name}"] = (statistics.median(r[0] for r in runs), runs[0][1], len(runs))
    for name in ("torch_f32", "torch_bf16"):
        runs = [torch_step_ms(t) for t in sorted(glob.glob(f"{out}/{name}.*.log"))]
        if runs:
            label = "PyTorch " + ("f32" if name == "torch_f32" else "bf16 autocast")
            ms[label] = (statistics.median(r[0] for r in runs), runs[0][1], len(runs))
    base = ms.get("H2 bf16", (None,))[0]
    print("| run | median step ms | tokens/s | step time vs H2 bf16 | runs |")
    print("|---|---:|---:|---:|---:|")
    for name, (m, tokens, n) in ms.items():
        ratio = f"{m / base:.2f}x" if base else "-"
        print(f"| {name} | {m:.1f} | {tokens / m * 1e3:,.0f} | {ratio} | {n} |")


if __name__ == "__main__":
    main()
