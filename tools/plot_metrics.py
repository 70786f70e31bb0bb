#!/usr/bin/env python3
"""Plots an `h2 train` metrics file (log.metrics_file, JSON lines): training and evaluation loss,
tokens/s and device memory against the step, one PNG with three panels.

The records follow train/metrics/metrics_log.h: every one has "event" (start, resume, step, eval,
stop, done), "time", "attempt" and an integer "step". A resumed run appends to the same file and
redoes the steps after its checkpoint; the rule is that the last record of each (event, step)
wins, so each step is plotted once, from the attempt that continued. Resumes and stops are marked.

Usage: plot_metrics.py METRICS.jsonl [--out loss.png] [--title TEXT]
Prints one line per curve (points, first and last value) so a script can check what was drawn.
"""

import argparse
import json
import sys


def read_records(path):
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{number}: not JSON: {e}")
    if not any(r.get("event") == "step" for r in records):
        sys.exit(f"{path}: no step records (is it an h2 train metrics file?)")
    return records


def last_per_step(records, event):
    """{step: record} for one event, later records replacing earlier ones (the resume rule)."""
    out = {}
    for r in records:
        if r.get("event") == event:
            out[r["step"]] = r
    return dict(sorted(out.items()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics", help="the metrics file (JSON lines) of h2 train")
    parser.add_argument("--out", default="metrics.png", help="PNG to write (default metrics.png)")
    parser.add_argument("--title", default=None, help="figure title (default: the file name)")
    args = parser.parse_args()
    records = read_records(args.metrics)
    steps = last_per_step(records, "step")
    evals = last_per_step(records, "eval")
    marks = [(r["step"], r["event"]) for r in records if r.get("event") in ("resume", "stop")]

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss, speed, memory) = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    x = list(steps)
    curves = [
        (loss, "train loss", x, [steps[s]["loss"] for s in x]),
        (loss, "eval loss", list(evals), [evals[s]["eval_loss"] for s in evals]),
        (speed, "tokens/s", x, [steps[s]["tokens_per_s"] for s in x]),
        (memory, "device memory (MiB)", x, [steps[s]["mem_bytes"] / 2**20 for s in x]),
    ]
    for axis, label, xs, ys in curves:
        if xs:
            axis.plot(xs, ys, marker="o" if label == "eval loss" else None, label=label)
            print(f"{label}: {len(xs)} points, step {xs[0]} {ys[0]:.4g} -> step {xs[-1]} {ys[-1]:.4g}")
    for axis in (loss, speed, memory):
        for step, event in marks:
            axis.axvline(step, color="grey", linestyle=":" if event == "resume" else "--")
        axis.grid(alpha=0.3)
    loss.set_ylabel("loss (nats)")
    loss.legend()
    speed.set_ylabel("tokens/s")
    memory.set_ylabel("MiB")
    memory.set_xlabel("step (dotted: resumed, dashed: stopped)")
    fig.suptitle(args.title or args.metrics)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
