"""H2 at 1,000+ chips by simulation (bench/scale_study.sh says what it runs).

Every figure comes from `h2 plan --datasheet` (the plan HeteroAuto picks, costed from the chips'
data-sheet figures) and `h2 simulate` (that plan's step replayed on every rank with flows sharing
the cluster's links). Writes OUT/study.json, the generated part of docs/scale.md (between its
study markers) and the plots under docs/scale/.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import yaml

CLUSTER = "configs/clusters/scale-1024.yaml"
MODELS = {  # name -> training config
    "7B": "configs/train/llama-7b.yaml",
    "100B-class": "configs/train/llama-100b.yaml",
}
SLOWDOWNS = [1, 2, 4, 10, 30, 100]  # the cross-type links' bandwidth divided by
ANCHOR = {
    "cluster": "configs/clusters/a100-64.yaml",
    "config": "configs/train/llama2-13b-torchtitan.yaml",
    "plan": "configs/plans/torchtitan-13b-a100-64.yaml",
    "published_tokens_per_s_per_gpu": 2162,
    "source": "torchtitan docs/performance.md, Llama 2 13B, FSDP2 on 64 A100 80GB, local batch 2, "
              "no activation checkpointing: 2,162 tokens/s per GPU (61.1% MFU)",
}


class Study:
    def __init__(self, a):
        self.a = a
        self.profiles = os.path.join(a.out, "profiles")
        os.makedirs(a.out, exist_ok=True)

    def h2(self, args, log):
        path = os.path.join(self.a.out, log)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        t = time.monotonic()
        with open(path, "w") as f:
            p = subprocess.run([f"{self.a.bin}/h2"] + args, stdout=f, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            sys.exit(f"failed ({p.returncode}): h2 {' '.join(args)}; see {path}")
        return time.monotonic() - t

    def plan(self, cluster, config, name, extra=()):
        """The search's best plan for `config` on `cluster` (extra: --part, --wires, ...)."""
        out = os.path.join(self.a.out, "plans", f"{name}.yaml")
        wall = self.h2(["plan", "--datasheet", "--cluster", cluster, config, "--profiles",
                        self.profiles, "--out", out, *extra], f"logs/plan-{name}.log")
        return out, wall

    def simulate(self, cluster, config, plan, name, extra=()):
        out = os.path.join(self.a.out, "sim", f"{name}.json")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        self.h2(["simulate", "--datasheet", "--cluster", cluster, config, "--plan", plan,
                 "--profiles", self.profiles, "--json", out, *extra], f"logs/simulate-{name}.log")
        report = json.load(open(out))
        report["plan_file"] = plan
        report["plan_text"] = yaml.safe_load(open(plan))
        return report

    def slowed(self, factor):
        """The study cluster with its cross-type links' bandwidth divided by `factor`."""
        if factor == 1:
            return CLUSTER
        c = yaml.safe_load(open(CLUSTER))
        c["name"] = f"{c['name']}-cross-{factor}x-slower"
        for link in c["links"]["cross_type"].values():
            link["bandwidth"] = float(link["bandwidth"]) / factor
        path = os.path.join(self.a.out, "clusters", f"cross-{factor}x.yaml")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        yaml.safe_dump(c, open(path, "w"), sort_keys=False)
        return path


def part_grad_accum(config, chip):
    """train.grad_accum of `config` scaled by the share of the study cluster's chips of `chip`."""
    nodes = yaml.safe_load(open(CLUSTER))["nodes"]
    count = lambda n: n["count"] * n.get("repeat", 1)
    share = sum(count(n) for n in nodes if n["chip"] == chip) / sum(count(n) for n in nodes)
    accum = yaml.safe_load(open(config))["train"]["grad_accum"] * share
    if accum != int(accum):
        sys.exit(f"{config}: grad_accum x {share} is not whole; pick a multiple")
    return int(accum)


def chip_types(cluster):
    return list(dict.fromkeys(n["chip"] for n in yaml.safe_load(open(cluster))["nodes"]))


def stage_table(report):
    """Per chip type of a simulated plan: stages, blocks, ranks, rows per rank, busy, memory."""
    plan = report["plan_text"]
    rows = plan["micro_batch_rows"]
    by_chip = {}
    for st, pos in zip(plan["stages"], report["positions"] * plan.get("chunks", 1)):
        chip = st["chip"].split(":")[-1]
        first, _, last = str(st["layers"]).partition("-")
        blocks = int(last or first) - int(first) + 1
        e = by_chip.setdefault(chip, {"stages": 0, "blocks": 0, "ranks": 0, "rows_per_rank": set(),
                                      "compute_s": [], "idle_s": [], "memory": []})
        e["stages"] += 1
        e["blocks"] += blocks
        e["ranks"] += len(st["ranks"]) * plan.get("replicas", 1)
        e["rows_per_rank"].add(rows // len(st["ranks"]))
        e["compute_s"].append(pos["compute_s"])
        e["idle_s"].append(pos["idle_s"])
        e["memory"].append(pos["peak_bytes"] / pos["capacity_bytes"])
    return by_chip


def describe(report):
    p = report["plan_text"]
    stages = len(p["stages"])
    wire = p.get("wire_dtype", "compute")
    return (f"{stages} stage{'s' if stages > 1 else ''} x {p.get('replicas', 1)} replica"
            f"{'s' if p.get('replicas', 1) > 1 else ''}, {p['schedule']}, {p['micro_batches']} "
            f"micro-batches of {p['micro_batch_rows']} rows, {'FSDP' if p.get('fsdp') else 'no FSDP'}"
            f"{', recompute' if p.get('recompute') else ''}, wire {wire}")


def run_study(a):
    s = Study(a)
    result = {"models": {}, "slowdown": [], "wire": [], "zeropp": [], "speed": [], "anchor": {}}
    types = chip_types(CLUSTER)
    for model, config in MODELS.items():
        print(f"== {model}: each chip type alone, then the mixed cluster", flush=True)
        parts = {}
        for chip in types:
            # Each part alone does its share of the work: the global batch scaled by its share
            # of the chips, so that every chip sees as many sequences per step as in the mixed
            # cluster (weak scaling; the parts together step through the same batch).
            batch = ["--part", chip, "--set", f"train.grad_accum={part_grad_accum(config, chip)}"]
            plan, _ = s.plan(CLUSTER, config, f"{model}-part-{chip}", batch)
            parts[chip] = s.simulate(CLUSTER, config, plan, f"{model}-part-{chip}", batch)
        plan, wall = s.plan(CLUSTER, config, f"{model}-mixed")
        mixed = s.simulate(CLUSTER, config, plan, f"{model}-mixed",
                           ["--trace", os.path.join(a.out, f"trace-{model}.json")])
        total = sum(r["tokens_per_s"] for r in parts.values())
        result["models"][model] = {"config": config, "parts": parts, "mixed": mixed,
                                   "ratio": mixed["tokens_per_s"] / total, "plan_wall_s": wall}
    model = "100B-class"
    config = MODELS[model]
    base = result["models"][model]
    fixed_plan = base["mixed"]["plan_file"]
    parts_total = sum(r["tokens_per_s"] for r in base["parts"].values())
    for factor in SLOWDOWNS:
        print(f"== {model}: cross-type links {factor}x slower", flush=True)
        cluster = s.slowed(factor)
        plan, _ = s.plan(cluster, config, f"slow-{factor}x")
        replanned = s.simulate(cluster, config, plan, f"slow-{factor}x")
        fixed = s.simulate(cluster, config, fixed_plan, f"slow-{factor}x-fixed-plan")
        fp8_plan, _ = s.plan(cluster, config, f"slow-{factor}x-fp8",
                             ["--wires", "compute,bf16,f8e4m3"])
        fp8 = s.simulate(cluster, config, fp8_plan, f"slow-{factor}x-fp8")
        result["slowdown"].append({"factor": factor, "replanned": replanned, "fixed": fixed,
                                   "fp8": fp8, "parts_tokens_per_s": parts_total})
    print(f"== {model}: ZeroPP (FSDP in the stages' groups) off, and gather groups", flush=True)
    plan, _ = s.plan(CLUSTER, config, "no-fsdp", ["--no-fsdp"])
    result["zeropp"].append({"what": "FSDP off (--no-fsdp), re-planned",
                             "report": s.simulate(CLUSTER, config, plan, "no-fsdp")})
    if base["mixed"]["plan_text"].get("fsdp"):
        for group in (1, 4):
            p = dict(base["mixed"]["plan_text"])
            p["gather_group"] = group
            p.pop("predicted", None)
            path = os.path.join(a.out, "plans", f"gather-group-{group}.yaml")
            yaml.safe_dump(p, open(path, "w"), sort_keys=False)
            result["zeropp"].append({
                "what": f"the mixed plan, parameters gathered once per {group} micro-batch"
                        f"{'es' if group > 1 else ''}",
                "report": s.simulate(CLUSTER, config, path, f"gather-group-{group}")})
    print("== simulator speed at 1,024 and 4,096 chips", flush=True)
    for cluster in (CLUSTER, "configs/clusters/scale-4096.yaml"):
        name = os.path.basename(cluster)[:-5]
        plan, wall = s.plan(cluster, config, f"speed-{name}")
        r = s.simulate(cluster, config, plan, f"speed-{name}")
        result["speed"].append({"cluster": cluster, "plan_wall_s": wall, "report": r})
    print("== the homogeneous anchor", flush=True)
    r = s.simulate(ANCHOR["cluster"], ANCHOR["config"], ANCHOR["plan"], "anchor")
    per_gpu = r["tokens_per_s"] / r["ranks"]
    result["anchor"] = dict(ANCHOR, report=r, simulated_tokens_per_s_per_gpu=per_gpu,
                            error=per_gpu / ANCHOR["published_tokens_per_s_per_gpu"] - 1)
    json.dump(result, open(os.path.join(a.out, "study.json"), "w"), indent=1)
    return result


def plots(result, folder):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plots need matplotlib: apt-get install python3-matplotlib")
    os.makedirs(folder, exist_ok=True)
    written = []

    def save(fig, name, legend_ax=None):
        if legend_ax is not None:
            legend_ax.legend(fontsize=7)
            fig.tight_layout()
        written.append(os.path.join(folder, name))
        fig.savefig(written[-1], dpi=120)

    # 1. Each model: the parts' tokens/s stacked against the mixed cluster's, one panel each.
    models = list(result["models"].items())
    fig, axes = plt.subplots(1, len(models), figsize=(8.5, 3.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (model, m) in zip(axes, models):
        bottom = 0
        for c, (chip, r) in enumerate(m["parts"].items()):
            v = r["tokens_per_s"] / 1e3
            ax.bar(0, v, 0.6, bottom=bottom, color=colors[c], label=chip)
            bottom += v
        ax.bar(1, m["mixed"]["tokens_per_s"] / 1e3, 0.6, color="black", label="mixed, one plan")
        ax.text(1, m["mixed"]["tokens_per_s"] / 1e3, f"{m['ratio']:.3f}x", ha="center",
                va="bottom", fontsize=8)
        ax.set_xticks([0, 1], ["parts alone", "mixed"])
        ax.set_title(model, fontsize=10)
        ax.set_ylabel("thousand tokens/s")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center right")
    fig.suptitle("Sum of the parts alone (stacked) vs the mixed cluster", fontsize=11)
    fig.tight_layout(rect=(0, 0, 0.83, 1))
    save(fig, "superlinear.png")
    # 2. Ratio against the cross-type link's slowdown.
    fig, ax = plt.subplots(figsize=(6, 3.5))
    f = [x["factor"] for x in result["slowdown"]]
    for key, label in (("replanned", "re-planned"), ("fixed", "plan of the full-speed link"),
                       ("fp8", "re-planned, FP8 wire allowed")):
        ax.plot(f, [x[key]["tokens_per_s"] / x["parts_tokens_per_s"] for x in result["slowdown"]],
                marker="o", label=label)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("cross-type links slower by")
    ax.set_ylabel("mixed / sum of parts")
    ax.set_title("100B-class on scale-1024: where the slow link ends the gain")
    save(fig, "link-slowdown.png", ax)
    # 3. Where each position's time goes in the 100B-class mixed plan.
    r = result["models"]["100B-class"]["mixed"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    bottom = [0.0] * len(r["positions"])
    for key in ("compute_s", "staging_s", "exposed_s", "idle_s"):
        v = [p[key] for p in r["positions"]]
        ax.bar(range(len(v)), v, bottom=bottom, label=key[:-2])
        bottom = [b + x for b, x in zip(bottom, v)]
    ax.set_xticks(range(len(v)), [f"{q}\n{p['chip'][-1]}" for q, p in enumerate(r["positions"])],
                  fontsize=6)
    ax.set_xlabel("schedule position (chip type)")
    ax.set_ylabel("seconds per step, mean rank")
    ax.set_title("100B-class mixed plan: each position's step")
    save(fig, "positions.png", ax)
    return written


def markdown(result, machine):
    L = []
    L.append(f"Generated by `bash bench/scale_study.sh` on {machine}; every figure is "
             f"`h2 plan --datasheet` then `h2 simulate` (data-sheet profiles, default "
             f"efficiencies).\n")
    for model, m in result["models"].items():
        L.append(f"### {model} ({m['config']}) on scale-1024\n")
        L.append("| cluster | plan | step s | tokens/s |")
        L.append("|---|---|---|---|")
        for chip, r in m["parts"].items():
            L.append(f"| {chip} alone ({r['ranks']} ranks used) | {describe(r)} | "
                     f"{r['step_s']:.2f} | {r['tokens_per_s']:,.0f} |")
        total = sum(r["tokens_per_s"] for r in m["parts"].values())
        r = m["mixed"]
        L.append(f"| sum of the parts (each on its share of the batch) | | | {total:,.0f} |")
        L.append(f"| mixed ({r['ranks']} ranks used) | {describe(r)} | {r['step_s']:.2f} | "
                 f"{r['tokens_per_s']:,.0f} |")
        L.append(f"\n**Mixed / sum of parts: {m['ratio']:.3f}.** Stages per chip type in the "
                 f"mixed plan:\n")
        L.append("| chip | stages | blocks | ranks | rows per rank | compute s (mean rank) | "
                 "idle s | memory used |")
        L.append("|---|---|---|---|---|---|---|---|")
        for chip, e in stage_table(r).items():
            L.append(f"| {chip} | {e['stages']} | {e['blocks']} | {e['ranks']} | "
                     f"{'/'.join(str(x) for x in sorted(e['rows_per_rank']))} | "
                     f"{sum(e['compute_s']) / len(e['compute_s']):.2f} | "
                     f"{sum(e['idle_s']) / len(e['idle_s']):.2f} | "
                     f"{100 * min(e['memory']):.0f}-{100 * max(e['memory']):.0f}% |")
        L.append("")
    L.append("### Cross-type links slower (100B-class)\n")
    L.append("| slower by | re-planned tokens/s | / parts | plan | full-speed plan kept, / parts | "
             "FP8 wire allowed, / parts | its wire |")
    L.append("|---|---|---|---|---|---|---|")
    for x in result["slowdown"]:
        parts = x["parts_tokens_per_s"]
        L.append(f"| {x['factor']}x | {x['replanned']['tokens_per_s']:,.0f} | "
                 f"{x['replanned']['tokens_per_s'] / parts:.3f} | {describe(x['replanned'])} | "
                 f"{x['fixed']['tokens_per_s'] / parts:.3f} | "
                 f"{x['fp8']['tokens_per_s'] / parts:.3f} | "
                 f"{x['fp8']['plan_text'].get('wire_dtype', 'compute')} |")
    L.append("\n### ZeroPP (100B-class, full-speed links)\n")
    L.append("| variant | plan | step s | tokens/s | peak memory, worst position |")
    L.append("|---|---|---|---|---|")
    base = result["models"]["100B-class"]["mixed"]
    for label, r in [("the mixed plan (as searched)", base)] + [
            (z["what"], z["report"]) for z in result["zeropp"]]:
        worst = max(p["peak_bytes"] / p["capacity_bytes"] for p in r["positions"])
        L.append(f"| {label} | {describe(r)} | {r['step_s']:.2f} | {r['tokens_per_s']:,.0f} | "
                 f"{100 * worst:.0f}% |")
    L.append("\n### Simulator speed (one core for the replay)\n")
    L.append("| cluster | ranks in the plan | tasks | transfers | simulate wall s | peak RSS MiB | "
             "h2 plan wall s |")
    L.append("|---|---|---|---|---|---|---|")
    for x in result["speed"]:
        r = x["report"]
        L.append(f"| {x['cluster']} | {r['ranks']} | {r['tasks']:,} | {r['transfers']:,} | "
                 f"{r['wall_s']:.2f} | {r['peak_rss_mib']:.0f} | {x['plan_wall_s']:.1f} |")
    an = result["anchor"]
    L.append("\n### Homogeneous anchor\n")
    L.append(f"{an['source']}. Simulated ({an['plan']} on {an['cluster']}): "
             f"**{an['simulated_tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, "
             f"{100 * an['error']:+.1f}%** against the published "
             f"{an['published_tokens_per_s_per_gpu']:,}.\n")
    return "\n".join(L) + "\n"


def machine():
    info = open("/proc/cpuinfo").read()
    model = re.search(r"model name\s*:\s*(.*)", info).group(1)
    flags = info.split("flags")[1].split("\n")[0]
    keep = [f for f in ("avx2", "avx512f", "amx_tile") if f" {f}" in flags]
    return f"{model}, {os.cpu_count()} cores, {' '.join(keep)}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--bin", required=True)
    p.add_argument("--doc", required=True, help="markdown file with study markers to fill")
    p.add_argument("--plots", required=True, help="folder for the PNG plots")
    a = p.parse_args()
    result = run_study(a)
    pngs = plots(result, a.plots)
    text = markdown(result, machine())
    open(os.path.join(a.out, "study.md"), "w").write(text)
    doc = open(a.doc).read()
    begin, end = "<!-- study:begin -->", "<!-- study:end -->"
    if begin not in doc or end not in doc:
        sys.exit(f"{a.doc} has no {begin} ... {end} block to fill")
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    open(a.doc, "w").write(head + begin + "\n" + text + end + tail)
    print(text)
    print("plots: " + ", ".join(pngs))


if __name__ == "__main__":
    main()
