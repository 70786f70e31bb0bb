#!/usr/bin/env python3
"""Summarises bench/lowp_bench.sh: per run name, the median over rounds of the median step time
after the warm-up, tokens/s and the ratio to the bf16 step of the same build; then the fast-mode
step time, the least over rounds of each run's 10th-percentile step, and its ratio likewise; then
the PyTorch peer rows (torch_f32, torch_bf16) where they exist.

The fast-mode column is for machines whose speed changes in phases shorter than a run (the
2-core EPYC of docs/performance.md, stop 36: bf16 steps of about 70 and 81 ms alternating within
seconds): medians then mix the phases in proportions that differ from run to run, while each
run's low percentile is its fast phase. Rows named base_* (BASE in lowp_bench.sh) are compared
with base_bf16 where it exists.
Usage: lowp_summary.py OUT_DIR NAME..."""
import glob
import json
import statistics
import sys

FAST_PERCENTILE = 0.1


def step_ms(jsonl, warm):
    """The step times after the warm-up, sorted, and the tokens per step."""
    lines = [json.loads(x) for x in open(jsonl) if x.strip()]
    steps = [x for x in lines if x.get("event") == "step" and x["step"] > warm]
    tokens = steps[0]["tokens_per_s"] * steps[0]["step_ms"] / 1e3
    return sorted(x["step_ms"] for x in steps), tokens


def torch_step_ms(log):
    record = json.loads([x for x in open(log) if x.startswith("{")][-1])
    return record["step_ms"], record["tokens_per_step"]


def main():
    out, names = sys.argv[1], sys.argv[2:]
    warm = int(open(f"{out}/warmup").read())
    rows = {}  # label -> (median ms, fast-mode ms, tokens per step, runs)
    for name in names:
        runs = [step_ms(j, warm) for j in sorted(glob.glob(f"{out}/{name}.*.jsonl"))]
        if runs:
            median = statistics.median(statistics.median(times) for times, _ in runs)
            fast = min(times[int(FAST_PERCENTILE * len(times))] for times, _ in runs)
            rows[name] = (median, fast, runs[0][1], len(runs))
    for name in ("torch_f32", "torch_bf16"):
        runs = [torch_step_ms(t) for t in sorted(glob.glob(f"{out}/{name}.*.log"))]
        if runs:
            label = "PyTorch " + ("f32" if name == "torch_f32" else "bf16 autocast")
            times = [r[0] for r in runs]
            rows[label] = (statistics.median(times), min(times), runs[0][1], len(runs))

    def reference(name):
        return rows.get("base_bf16" if name.startswith("base_") and "base_bf16" in rows else "bf16")

    print("| run | median step ms | tokens/s | vs bf16 | fast-mode step ms | fast-mode vs bf16 |"
          " runs |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (median, fast, tokens, n) in rows.items():
        ref = reference(name)
        ratio = f"{median / ref[0]:.2f}x" if ref else "-"
        fast_ratio = f"{fast / ref[1]:.3f}x" if ref else "-"
        label = name if name.startswith("PyTorch") else f"H2 {name}"
        print(f"| {label} | {median:.1f} | {tokens / median * 1e3:,.0f} | {ratio} | {fast:.1f} |"
              f" {fast_ratio} | {n} |")


if __name__ == "__main__":
    main()
