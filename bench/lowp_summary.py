#!/usr/bin/env python3
"""Summarises bench/lowp_bench.sh: per run name, the median over rounds of the median step time
after the warm-up, tokens/s and the ratio to the bf16 step of the same build; then the fast-mode
step time, the least over rounds of each run's 10th-percentile step, and its ratio likewise; the
paired ratio; then the PyTorch peer rows (torch_f32, torch_bf16) where they exist.

The fast-mode column is for machines whose speed changes in phases shorter than a run (the
2-core EPYC of docs/performance.md, stop 36: bf16 steps of about 70 and 81 ms alternating within
seconds): medians then mix the phases in proportions that differ from run to run, while each
run's low percentile is its fast phase. The paired column is the median over rounds of each
round's ratio of median steps, the run against bf16 in the same round (rounds run back to back,
so a slow phase tends to cover both). Rows named base_* (BASE in lowp_bench.sh) are compared
with base_bf16 where it exists. A second table splits the paired ratio by the core-link state of
the two runs of each pair (bench/core_link.py: both close, both distant, or changed), since the
2-core EPYCs of docs/performance.md move between two speeds that a pair may straddle.
Usage: lowp_summary.py OUT_DIR NAME..."""
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_link import link_state  # noqa: E402

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


def round_of(path):
    """The round number in OUT/NAME.ROUND.jsonl (or .log)."""
    return int(path.rsplit(".", 2)[1])


def main():
    out, names = sys.argv[1], sys.argv[2:]
    warm = int(open(f"{out}/warmup").read())
    rows = {}  # label -> (median ms, fast-mode ms, tokens per step, runs, {round: median ms})
    for name in names:
        paths = sorted(glob.glob(f"{out}/{name}.*.jsonl"))
        runs = [step_ms(j, warm) for j in paths]
        if runs:
            per_round = {
                round_of(j): statistics.median(times) for j, (times, _) in zip(paths, runs)
            }
            median = statistics.median(per_round.values())
            fast = min(times[int(FAST_PERCENTILE * len(times))] for times, _ in runs)
            rows[name] = (median, fast, runs[0][1], len(runs), per_round)
    for name in ("torch_f32", "torch_bf16"):
        paths = sorted(glob.glob(f"{out}/{name}.*.log"))
        runs = [torch_step_ms(t) for t in paths]
        if runs:
            label = "PyTorch " + ("f32" if name == "torch_f32" else "bf16 autocast")
            times = [r[0] for r in runs]
            per_round = {round_of(t): r[0] for t, r in zip(paths, runs)}
            rows[label] = (statistics.median(times), min(times), runs[0][1], len(runs), per_round)

    def reference_name(name):
        return "base_bf16" if name.startswith("base_") and "base_bf16" in rows else "bf16"

    def reference(name):
        return rows.get(reference_name(name))

    def paired(per_round, ref_rounds):
        """The median over rounds of the run's median step over the reference's in that round."""
        ratios = [per_round[r] / ref_rounds[r] for r in per_round if r in ref_rounds]
        return f"{statistics.median(ratios):.3f}x" if ratios else "-"

    print("| run | median step ms | tokens/s | vs bf16 | fast-mode step ms | fast-mode vs bf16 |"
          " paired vs bf16 | runs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (median, fast, tokens, n, per_round) in rows.items():
        ref = reference(name)
        ratio = f"{median / ref[0]:.2f}x" if ref else "-"
        fast_ratio = f"{fast / ref[1]:.3f}x" if ref else "-"
        paired_ratio = paired(per_round, ref[4]) if ref else "-"
        label = name if name.startswith("PyTorch") else f"H2 {name}"
        print(f"| {label} | {median:.1f} | {tokens / median * 1e3:,.0f} | {ratio} | {fast:.1f} |"
              f" {fast_ratio} | {paired_ratio} | {n} |")
    print_paired_by_state(out, names, rows, reference_name)


def print_paired_by_state(out, names, rows, reference_name):
    """Per run and core-link state of its pairs, the pairs and their median ratio."""
    lines = []
    for name in names:
        ref = reference_name(name)
        if name not in rows or name == ref or ref not in rows:
            continue
        per_round, ref_rounds = rows[name][4], rows[ref][4]
        by_state = {}
        for r in per_round:
            if r not in ref_rounds:
                continue
            states = {link_state(f"{out}/{n}.{r}.link") for n in (name, ref)}
            state = states.pop() if len(states) == 1 else "changed"
            by_state.setdefault(state, []).append(per_round[r] / ref_rounds[r])
        for state in ("close", "distant", "changed", "unknown"):
            if state in by_state:
                ratios = by_state[state]
                lines.append(f"| H2 {name} | {state} | {len(ratios)} |"
                             f" {statistics.median(ratios):.3f}x |")
    if lines:
        print()
        print("| run | core link of the pair | pairs | paired vs bf16 (median) |")
        print("|---|---|---:|---:|")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
