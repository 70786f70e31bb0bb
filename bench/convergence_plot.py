#!/usr/bin/env python3
"""Table and loss-curve plot of a low-precision convergence study (bench/convergence.sh).

Reads RUN_DIR/NAME/metrics.jsonl for each run (H2's metrics lines: step, loss, eval_loss; a
final {"event": "done"} line), prints a Markdown table of final evaluation losses
relative to the bf16 run with each recipe's target, and renders the training and evaluation
curves to a PNG (matplotlib; Debian: apt-get install python3-matplotlib).

With several RUN_DIRs (the same study with other seeds: bench/convergence.sh's SEED), the table
gives each run's difference to the bf16 run of the same directory and their mean, and judges the
target on the mean; the plot shows the first directory.

Usage: convergence_plot.py RUN_DIR [RUN_DIR ...] [--png FILE] [--runs NAME ...]
"""
import argparse
import json
import pathlib
import sys

# The targets: relative difference of the final evaluation loss to the BF16 run.
TARGETS = {"fp8_blockwise": 0.005, "mxfp8": 0.005, "fp8_current": 0.005, "fp8_delayed": 0.005,
           "nvfp4": 0.02, "mxfp4": 0.02, "mxfp8_ceil": 0.005, "mxfp4_ceil": 0.02}
# the *_no_switch runs are controls: no target; *_ceil are their recipe with mx_scale: ceil


def read_run(path):
    steps, losses, evals, done = [], [], [], None
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == "done":
            done = record
            continue
        if record.get("event") != "step":
            continue
        steps.append(record["step"])
        losses.append(record["loss"])
        if "eval_loss" in record:
            evals.append((record["step"], record["eval_loss"]))
    if done is None:
        raise SystemExit(f"{path}: the run did not finish (no 'done' line)")
    return {"steps": steps, "loss": losses, "eval": evals, "done": done}


def smooth(values, window=5):
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1): i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def target_cells(name, rel):
    """The target and met cells of a run whose final loss differs from bf16's by rel."""
    target = TARGETS.get(name)
    if target is None:
        return "- | -"
    return f"{100 * target:.1f}% | {'yes' if abs(rel) <= target else 'NO'}"


def table(runs):
    base = runs["bf16"]["eval"][-1][1] if "bf16" in runs else None
    lines = ["| run | eval loss at step 2000 | vs bf16 | target | met |",
             "|---|---|---|---|---|"]
    for name, run in runs.items():
        final = run["eval"][-1][1]
        if base is None or name == "bf16":
            lines.append(f"| {name} | {final:.4f} | - | - | - |")
            continue
        rel = (final - base) / base
        lines.append(f"| {name} | {final:.4f} | {100 * rel:+.2f}% | {target_cells(name, rel)} |")
    return "\n".join(lines)


def seeds_table(studies):
    """Markdown table over several studies (dicts of runs), each run relative to its study's bf16."""
    names = [n for n in studies[0] if n != "bf16" and all(n in s for s in studies)]
    lines = ["| run | eval loss at the end, vs bf16, per study | mean | target | met |",
             "|---|---|---|---|---|"]
    for name in ["bf16"] + names:
        finals = [s[name]["eval"][-1][1] for s in studies]
        if name == "bf16":
            lines.append(f"| bf16 | {' / '.join(f'{v:.4f}' for v in finals)} | - | - | - |")
            continue
        rels = [(v - s["bf16"]["eval"][-1][1]) / s["bf16"]["eval"][-1][1]
                for v, s in zip(finals, studies)]
        mean = sum(rels) / len(rels)
        per = " / ".join(f"{v:.4f} ({100 * r:+.2f}%)" for v, r in zip(finals, rels))
        lines.append(f"| {name} | {per} | {100 * mean:+.2f}% | {target_cells(name, mean)} |")
    return "\n".join(lines)


def plot(runs, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (train_ax, eval_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, run in runs.items():
        train_ax.plot(run["steps"], smooth(run["loss"]), label=name, linewidth=1.2)
        eval_ax.plot([s for s, _ in run["eval"]], [v for _, v in run["eval"]], marker="o",
                     markersize=3, label=name, linewidth=1.2)
    train_ax.set(title="training loss (moving average of 5 logged steps)", xlabel="step",
                 ylabel="loss (nats/byte)")
    eval_ax.set(title="evaluation loss", xlabel="step", ylabel="loss (nats/byte)")
    final_steps = max(max(run["steps"]) for run in runs.values())
    for ax in (train_ax, eval_ax):
        ax.grid(alpha=0.3)
        ax.legend()
    # Zoom the evaluation panel on the last half, where the recipes differ.
    tail = [v for run in runs.values() for s, v in run["eval"] if s >= final_steps / 2]
    if tail:
        eval_ax.set_ylim(min(tail) - 0.05, max(tail) + 0.1)
        eval_ax.set_xlim(final_steps / 2 - 50, final_steps + 50)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"plot: {png}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=pathlib.Path, nargs="+",
                        help="a study's output directory; several: one per seed")
    parser.add_argument("--png", type=pathlib.Path)
    parser.add_argument("--runs", nargs="+",
                        default=["bf16", "fp8_blockwise", "mxfp8", "nvfp4", "mxfp4"])
    args = parser.parse_args()
    studies = []
    for run_dir in args.run_dirs:
        runs = {}
        for name in args.runs:
            path = run_dir / name / "metrics.jsonl"
            if not path.exists():
                print(f"{path}: missing, skipped", file=sys.stderr)
                continue
            runs[name] = read_run(path)
        if not runs:
            raise SystemExit(f"{run_dir}: no runs found")
        studies.append(runs)
    if len(studies) == 1:
        print(table(studies[0]))
    elif all("bf16" in s for s in studies):
        print(seeds_table(studies))
    else:
        raise SystemExit("several studies are compared through their bf16 runs: one lacks it")
    if args.png:
        plot(studies[0], args.png)


if __name__ == "__main__":
    main()
