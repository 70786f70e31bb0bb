#!/usr/bin/env python3
"""How far one training step's gradient under each low-precision recipe lies from the f32
gradient of the same weights and batch, for one h2 build or several side by side.

It answers in a minute what a convergence study (bench/convergence.sh) answers in hours and
through run-to-run noise: did a change make a recipe's gradients worse? A final loss moves by
0.5-0.8% with the order of the FP32 sums alone (docs/numerics.md); the gradient's error, summed
over millions of elements, moves by a few tenths of a percent between seeds.

Method. Each run is one step of `h2 train` with gradient clipping off and a checkpoint after it;
the step's gradient is read back from AdamW's first moment (m1 = beta1 m0 + (1 - beta1) g with
beta1 = 0.9; optimizer/m/* in the checkpoint's safetensors). The reference is the first build's
f32 step. A seed gives other initial weights and another batch (with --from CKPT_DIR: the
checkpoint's weights, another batch) and other stochastic-rounding draws; every build sees the
same weights and batch for a seed, so builds are compared seed by seed.

Per run, over the block linears' weights (the quantized GEMMs) and over the other weights:
  err  = ||g - g_f32|| / ||g_f32||          noise and bias together
  proj = <g - g_f32, g_f32> / ||g_f32||^2   the error along the true gradient (< 0: shrinks it)
Each row also carries both figures per projection kind (q_proj ... down_proj), and the step's
loss relative to the f32 step's: what the recipe's forward alone costs on the same batch.

Usage (from the repository root):
  bench/gradient_probe.py [--h2 NAME=PATH ...] [--recipes R ...] [--seeds S ...]
                          [--from CKPT_DIR] [--config YAML] [--set KEY=VALUE ...] [--jsonl FILE]
Needs NumPy (Debian: python3-numpy, which scripts/install_deps.sh installs).
"""
import argparse
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

# The safetensors reader of the export tests (NumPy only), not a second one.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "python"))
from llama_numpy import read_safetensors  # noqa: E402

BETA1 = 0.9  # AdamW's default in optim/adamw.h; the run's optimizer must use it
KINDS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def read_moments(path):
    """AdamW's first moments from a checkpoint shard: {parameter name: float64 array}."""
    prefix = "optimizer/m/"
    moments = {k[len(prefix):]: v for k, v in read_safetensors(path).items()
               if k.startswith(prefix)}
    if not moments:
        raise SystemExit(f"{path}: no optimizer/m/* tensors (not an AdamW checkpoint?)")
    return moments


def only_shard(step_dir):
    """The checkpoint's one shard: the probe reads whole tensors, so single-rank runs only."""
    shards = sorted(step_dir.glob("rank_*.safetensors"))
    if len(shards) != 1:
        raise SystemExit(f"{step_dir}: {len(shards)} shards; the probe needs a single-rank run")
    return shards[0]


def newest_step(ckpt_dir):
    # By the step's number, not the name: step_1000000 follows step_999999.
    steps = sorted((p for p in ckpt_dir.glob("step_*")
                    if p.name[len("step_"):].isdigit() and (p / "manifest.json").is_file()),
                   key=lambda p: int(p.name[len("step_"):]))
    if not steps:
        raise SystemExit(f"--from {ckpt_dir}: no complete step_* checkpoint in it")
    return int(steps[-1].name[len("step_"):])


def recipe_sets(run):
    """The overrides of a run named RECIPE or RECIPE@KEY=VALUE[@KEY=VALUE...]: the recipe on
    every block linear for the whole run (no switch to a target recipe); f32 and bf16 with none."""
    recipe, *extra = run.split("@")
    sets = ["precision.target_after=1"]
    if recipe == "f32":
        sets += ["train.dtype=f32", "precision.recipe=compute"]
    elif recipe == "bf16":
        sets += ["train.dtype=bf16", "precision.recipe=compute"]
    else:
        sets += ["train.dtype=bf16", f"precision.recipe={recipe}"]
    return sets + extra


def one_step_gradient(h2, recipe, seed, args, work):
    """The gradient and the loss of one step of `h2 train` (a run in the empty directory work)."""
    sets = [f"train.seed={seed}", "train.grad_clip=0", "train.grad_accum=1",
            "train.eval_batches=1", "log.every=1", f"checkpoint.dir={work}",
            f"log.metrics_file={work}/metrics.jsonl"] + recipe_sets(recipe) + args.set
    base_moments = None
    if args.base is None:
        step = 1
    else:
        base_dir = f"step_{args.base_step:06d}"
        shutil.copytree(args.base / base_dir, work / base_dir)
        step = args.base_step + 1
        sets.append("checkpoint.resume=true")
        base_moments = args.base_moments
    sets.append(f"train.steps={step}")
    command = [h2, "train", args.config] + [a for s in sets for a in ("--set", s)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{tail}")
    moments = read_moments(only_shard(work / f"step_{step:06d}"))
    if base_moments is None:
        grad = {k: m / (1 - BETA1) for k, m in moments.items()}
    else:
        grad = {k: (m - BETA1 * base_moments[k]) / (1 - BETA1) for k, m in moments.items()}
    return grad, step_loss(work / "metrics.jsonl", step)


def step_loss(metrics_file, step):
    """The training loss h2 logged for `step` (the forward in the run's precision). The run logs
    every step: one record shows that it trained that step alone (a run that did not resume
    from --from would have trained them all, and its moments would not be one step past the
    base's). Builds before the metrics' "event" field logged steps without it."""
    records = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    steps = [r for r in records if r.get("event", "step") == "step" and "loss" in r]
    if [r.get("step") for r in steps] != [step]:
        raise SystemExit(f"{metrics_file}: expected step {step} alone (did the run not resume "
                         f"from --from?), logged {len(steps)} steps")
    return steps[0]["loss"]


def distance(grad, ref, keys):
    """(err, proj) of grad against ref over the parameters keys (NaN where ref is all zeros)."""
    ref_sq = sum(float(np.sum(ref[k] ** 2)) for k in keys)
    if ref_sq == 0:
        return float("nan"), float("nan")
    err_sq = along = 0.0
    for k in keys:
        diff = grad[k] - ref[k]
        err_sq += float(np.sum(diff ** 2))
        along += float(np.sum(diff * ref[k]))
    return (err_sq / ref_sq) ** 0.5, along / ref_sq


def rows_of_seed(seed, builds, args, scratch):
    grads, losses = {}, {}
    runs = [(builds[0][0], "f32")] + [(b, r) for r in args.recipes for b, _ in builds]
    paths = dict(builds)
    for i, (build, recipe) in enumerate(runs):
        print(f"  seed {seed}: {build} {recipe} ({i + 1}/{len(runs)})", file=sys.stderr,
              flush=True)
        work = scratch / f"run_{i}"
        grads[(build, recipe)], losses[(build, recipe)] = one_step_gradient(
            paths[build], recipe, seed, args, work)
        shutil.rmtree(work, ignore_errors=True)
    ref = grads.pop((builds[0][0], "f32"))
    ref_loss = losses[(builds[0][0], "f32")]
    linears = [k for k in ref if any(k.endswith(f".{kind}.weight") for kind in KINDS)]
    others = [k for k in ref if k not in linears]
    if not linears:
        raise SystemExit("no block linear weights (*.q_proj.weight ...) in the checkpoint")
    for (build, recipe), grad in grads.items():
        row = {"seed": seed, "build": build, "recipe": recipe, "loss": losses[(build, recipe)],
               "loss_rel": losses[(build, recipe)] / ref_loss - 1}
        row["linear_err"], row["linear_proj"] = distance(grad, ref, linears)
        row["other_err"], row["other_proj"] = distance(grad, ref, others)
        for kind in KINDS:
            keys = [k for k in linears if k.endswith(f".{kind}.weight")]
            row[f"{kind}_err"], row[f"{kind}_proj"] = distance(grad, ref, keys)
        yield row


def mean_sem(values, sign="+"):
    """Mean ± standard error of the mean; sign "" leaves out the plus of positive means."""
    mean = f"{statistics.mean(values):{sign}.4f}"
    if len(values) < 2:
        return mean
    return f"{mean} ± {statistics.stdev(values) / len(values) ** 0.5:.4f}"


def summary(rows, builds, recipes):
    first = builds[0][0]
    lines = ["| recipe | build | loss / f32's - 1 | err, linears | proj, linears | err, others | "
             f"err - {first}'s | proj - {first}'s |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for recipe in recipes:
        base = {r["seed"]: r for r in rows if r["recipe"] == recipe and r["build"] == first}
        for build, _ in builds:
            mine = [r for r in rows if r["recipe"] == recipe and r["build"] == build]
            loss = mean_sem([r["loss_rel"] for r in mine])
            err = mean_sem([r["linear_err"] for r in mine], sign="")
            proj = mean_sem([r["linear_proj"] for r in mine])
            other = mean_sem([r["other_err"] for r in mine], sign="")
            if build == first:
                d_err = d_proj = "-"
            else:
                d_err = mean_sem([r["linear_err"] - base[r["seed"]]["linear_err"] for r in mine])
                d_proj = mean_sem([r["linear_proj"] - base[r["seed"]]["linear_proj"] for r in mine])
            lines.append(
                f"| {recipe} | {build} | {loss} | {err} | {proj} | {other} | {d_err} | {d_proj} |")
    return "\n".join(lines)


def parse_build(text):
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--h2 '{text}': expected NAME=PATH")
    if not pathlib.Path(path).is_file():
        raise argparse.ArgumentTypeError(f"--h2 '{text}': {path} is not a file")
    return name, path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--h2", dest="builds", action="append", type=parse_build,
                        help="NAME=PATH of an h2 binary (repeat to compare builds; the first "
                             "gives the f32 reference; default head=build/bin/h2)")
    parser.add_argument("--recipes", nargs="+",
                        default=["bf16", "fp8_blockwise", "mxfp8", "nvfp4", "mxfp4"],
                        help="runs to compare with f32: a recipe, or RECIPE@KEY=VALUE[@...] "
                             "for a variant (mxfp4@precision.mx_scale=ceil)")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 9)),
                        help="train.seed of each run: other batches and rounding draws, and at "
                             "the initial weights other weights (default 1-8)")
    parser.add_argument("--from", dest="base", type=pathlib.Path,
                        help="checkpoint directory whose newest step's weights every run starts "
                             "from (default: each seed's initial weights)")
    parser.add_argument("--config", default="configs/train/numerics-256.yaml",
                        help="a single-process training config with AdamW (default: the "
                             "convergence study's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="more config overrides for every run")
    parser.add_argument("--jsonl", type=pathlib.Path, help="also write every row here")
    args = parser.parse_args()
    try:
        builds = args.builds or [parse_build("head=build/bin/h2")]
    except argparse.ArgumentTypeError as e:
        parser.error(f"{e} (build it, or name a binary with --h2)")
    if "f32" in [run.split("@")[0] for run in args.recipes]:
        parser.error("--recipes: f32 is the reference every run is measured against")
    if len({name for name, _ in builds}) != len(builds):
        raise SystemExit("--h2: build names must differ")
    if args.base is not None:
        args.base_step = newest_step(args.base)
        args.base_moments = read_moments(
            args.base / f"step_{args.base_step:06d}" / "rank_00000.safetensors")

    rows = []
    with tempfile.TemporaryDirectory(prefix="h2_gradient_probe_") as scratch:
        for seed in args.seeds:
            rows.extend(rows_of_seed(seed, builds, args, pathlib.Path(scratch)))
    if args.jsonl:
        args.jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    start = "initial weights" if args.base is None else f"{args.base} step {args.base_step}"
    print(f"One step from {start}, seeds {' '.join(map(str, args.seeds))}; "
          "mean ± standard error over the seeds:\n")
    print(summary(rows, builds, args.recipes))


if __name__ == "__main__":
    main()
