#!/usr/bin/env python3
"""Mutation check: deliberate defects that the test suite must catch.

Each mutation below is a plausible bug (a recipe quantizing an operand with another operand's
spec, a term dropped from the memory estimate, a wrong scale on the FP8 pipeline wire, a model
that cannot see context, an off-by-one in a sampler). For each, this script edits the source, rebuilds the affected targets
incrementally, runs the tests named for it, and restores the file (also on Ctrl-C or a failed
build). A mutation is *caught* when at least one of its tests fails; the script exits 1 if any
survives, so a test that cannot fail the defect it names shows up here.

    tools/mutation_check.py [--build build] [--only NAME ...] [--list]

Needs a configured and built tree (scripts/build.sh). About 2-4 minutes per mutation on 2 cores
(one incremental build of a library and its tests, then the tests). Run it by hand after changing
the tests it names; it is not part of CI (each rebuild would cost CI minutes).
"""

import argparse
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Mutation:
    name: str
    defect: str
    path: str  # relative to the repository root
    find: str  # must occur exactly once
    replace: str
    targets: list  # build targets the defect reaches
    tests: str  # ctest -R regex of the tests that must catch it


MUTATIONS = [
    Mutation(
        name="recipe-operand-spec",
        defect="the weight gradient quantizes x^T with the weight's spec instead of the input's",
        path="models/layers/linear.cpp",
        find="lowp::QTensor xtq = quantize(x_, x, true, false);",
        replace="lowp::QTensor xtq = quantize(weight_, x, true, false);",
        targets=["h2_precision_tests"],
        tests=r"^LinearPrecision\.",
    ),
    Mutation(
        name="recipe-swapped-specs",
        defect="fp8_blockwise gives the weight the gradient's 1x128 tiles",
        path="core/lowp/recipe.cpp",
        find=".weight = blocks(Format::e4m3, ScaleRule::f32_amax, 128, 128),",
        replace=".weight = blocks(Format::e4m3, ScaleRule::f32_amax, 1, 128),",
        targets=["h2_precision_tests"],
        tests=r"^LinearPrecision\.EveryRecipes",
    ),
    Mutation(
        name="memory-head-term",
        defect="the memory estimate forgets the head's logits and their gradient",
        path="train/config/plan.cpp",
        find="if (last_stage) per_token += (C + 2 * V) * element;",
        replace="if (last_stage) per_token += C * element;",
        targets=["h2_config_tests"],
        tests=r"^Plan\.MemoryEstimate",
    ),
    Mutation(
        name="memory-activation-dtype",
        defect="the memory estimate counts bf16 activations at 4 bytes",
        path="train/config/plan.cpp",
        find="const int64_t element = dtype_storage_bytes(config.train.dtype, 1);",
        replace="const int64_t element = 4;",
        targets=["h2_config_tests"],
        tests=r"^Plan\.MemoryEstimate",
    ),
    Mutation(
        name="wire-scale",
        defect="the FP8 pipeline wire dequantizes every segment with the first segment's scales",
        path="parallel/pipeline/pipeline_transfers.cpp",
        find=".q = {from, in.scales.slice(0, segment.begin, segment.end), Tensor(), kWireSpec}});",
        replace=".q = {from, in.scales.slice(0, 0, segment.end - segment.begin), Tensor(), "
        "kWireSpec}});",
        targets=["h2_pp_training_tests"],
        tests=r"^PipelineWire\.",
    ),
    Mutation(
        name="context-blind",
        defect="the attention block's output is dropped: each position sees only itself",
        path="models/layers/attention.cpp",
        find="ops::add({.out = y, .a = y, .b = x});  // residual\n  h_ = h,",
        replace="ops::copy({.out = y, .in = x});  // residual\n  h_ = h,",
        targets=["h2_trainer_tests"],
        tests=r"^Trainer\.TheModelLearnsToUseContext$",
    ),
    Mutation(
        name="sampler-off-by-one",
        defect="the training sampler never draws the last window",
        path="train/data/sampler.cpp",
        find="num_windows_ = int64_t(tokens.size()) - seq_len;",
        replace="num_windows_ = int64_t(tokens.size()) - seq_len - 1;",
        targets=["h2_data_tests"],
        tests=r"^WindowSampler\.",
    ),
]


def run(command: list, log: Path) -> int:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        return subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode


def check(mutation: Mutation, build: Path, log: Path) -> str:
    source = ROOT / mutation.path
    original = source.read_text()
    if original.count(mutation.find) != 1:
        return f"stale: the text to mutate occurs {original.count(mutation.find)} times in {mutation.path}"
    try:
        source.write_text(original.replace(mutation.find, mutation.replace))
        if run(["cmake", "--build", str(build), "--target", *mutation.targets], log) != 0:
            return "build failed (see the log)"
        listed = subprocess.run(["ctest", "--test-dir", str(build), "-N", "-R", mutation.tests],
                                cwd=ROOT, capture_output=True, text=True).stdout
        if "Total Tests: 0" in listed:
            return f"no test matches {mutation.tests}"
        failed = run(["ctest", "--test-dir", str(build), "-R", mutation.tests, "-j2",
                      "--output-on-failure"], log)
        return "caught" if failed else "SURVIVED"
    finally:
        source.write_text(original)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, default=ROOT / "build", help="configured build folder")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutations")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    if args.list or not chosen:
        for m in MUTATIONS:
            print(f"{m.name:26} {m.path}: {m.defect}; tests {m.tests}")
        return 0 if chosen else 2
    log = args.build / "mutation-check.log"
    log.write_text("")
    results = []
    for m in chosen:
        start = time.monotonic()
        print(f"mutation_check: {m.name}: {m.defect} ...", flush=True)
        verdict = check(m, args.build, log)
        results.append((m, verdict))
        print(f"mutation_check: {m.name}: {verdict} ({time.monotonic() - start:.0f} s)", flush=True)
    # The tree is restored: rebuild what the mutations touched so the build matches the sources.
    run(["cmake", "--build", str(args.build), "--target",
         *sorted({t for m in chosen for t in m.targets})], log)
    print("\n| mutation | defect | tests | verdict |\n|---|---|---|---|")
    for m, verdict in results:
        print(f"| {m.name} | {m.defect} | `{m.tests}` | {verdict} |")
    print(f"\nlog: {log}")
    return 0 if all(v == "caught" for _, v in results) else 1


if __name__ == "__main__":
    sys.exit(main())
