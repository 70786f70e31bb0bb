"""The overlap benchmark (bench/overlap_bench.sh says what it measures); writes OUT/summary.md."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import yaml

from planner_bench import cpu_flags  # the machine line every benchmark prints

JOB = "bench/overlap/job.yaml"
PLAN = "bench/overlap/plan.yaml"
CLUSTER = "bench/overlap/cluster.yaml"
ZEROPP_CLUSTER = "bench/overlap/zeropp-cluster.yaml"
ZEROPP_PLAN = "bench/overlap/zeropp-plan.yaml"


def free_cluster(out):
    """The benchmark's cluster with a free cross-type link: the compute-only reference."""
    c = yaml.safe_load(open(CLUSTER))
    c["name"] = "slow-link-4-free"
    c["links"]["cross_type"] = {"bandwidth": 1e15, "latency": 0}
    path = os.path.join(out, "free-cluster.yaml")
    yaml.safe_dump(c, open(path, "w"), sort_keys=False)
    return path


def plan_file(out, lead, wire="auto"):
    plan = yaml.safe_load(open(PLAN))
    plan["lead"] = lead
    plan["wire_dtype"] = wire
    path = os.path.join(out, f"plan-lead{lead}-{wire}.yaml")
    yaml.safe_dump(plan, open(path, "w"), sort_keys=False)
    return path


def predict(a, cluster, plan):
    cmd = [f"{a.bin}/h2", "plan", "--cluster", cluster, JOB, "--profiles",
           os.path.join(a.out, "profiles"), "--evaluate", plan]
    p = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"([0-9.]+) ms/step", p.stdout)
    if not m:
        sys.exit(f"no prediction for {plan}:\n{p.stdout}{p.stderr}")
    return float(m.group(1)), p.stdout


def exposed_from_trace(path, step):
    """Each rank's exposed communication in `step`, recomputed from the Chrome trace alone (the
    definition of parallel/pipeline/exposed_comm.h): a compute action's wait after the last of
    its producers' SEND_F/SEND_B ended, plus UNSHARD and REDUCE_GRAD whole and the waits for
    other transfers inside compute (comm_wait_us: prefetched gathers, own sends with overlap
    off); milliseconds."""
    events = [e for e in json.load(open(path))["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") not in ("wait", "transfer")
              and e["args"]["step"] == step]
    kind_of = lambda e: re.match(r"[A-Z_]*[A-Z]", e["name"]).group(0)
    posted = {}
    for e in events:
        if kind_of(e) in ("SEND_F", "SEND_B"):
            key = (kind_of(e), e["args"]["peer"], e["args"]["microbatch"])
            posted[key] = max(posted.get(key, float("-inf")), e["ts"] + e["dur"])
    exposed = {}
    for e in events:
        k, rank = kind_of(e), e["pid"]
        us = e["args"].get("comm_wait_us", 0.0)
        if k in ("UNSHARD", "REDUCE_GRAD"):
            us += e["dur"]
        elif k in ("F", "B", "I") and e["args"].get("wait_us", 0) > 0:
            key = ("SEND_F" if k == "F" else "SEND_B", e["tid"], e["args"]["microbatch"])
            if key in posted:
                us += max(0.0, e["ts"] + e["args"]["wait_us"] - max(e["ts"], posted[key]))
        exposed[rank] = exposed.get(rank, 0.0) + us
    return [exposed.get(r, 0.0) / 1000 for r in range(max(exposed) + 1)]


def train(a, cluster, plan, name, extra=()):
    metrics = os.path.join(a.out, f"{name}.jsonl")
    trace = os.path.join(a.out, f"{name}.trace.json")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [f"{a.bin}/h2run", "-n", "4", "--cluster", cluster, "--", f"{a.bin}/h2", "train", JOB,
           "--set", f"parallel.plan={plan}", "--set", f"cluster.file={cluster}",
           "--set", f"train.steps={a.steps}", "--set", f"log.metrics_file={metrics}",
           "--set", f"log.trace_file={trace}", *extra]
    with open(os.path.join(a.out, f"{name}.log"), "w") as log:
        p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}; see {a.out}/{name}.log")
    last = [json.loads(l) for l in open(metrics) if '"step_ms"' in l][-1]
    idle = [last["wall_ms"] - b for b in last["busy_ms_per_rank"]]
    exposed = last["exposed_comm_ms_per_rank"]
    from_trace = exposed_from_trace(trace, last["step"])
    # Agreement on the ranks that waited on a link for more than a millisecond.
    disagreement = max([abs(m - t) / t for m, t in zip(exposed, from_trace) if t > 1] or [0.0])
    return {"step_ms": last["step_ms"], "overrun": max(last["emulation_overrun_per_rank"]),
            "idle_ms": idle, "exposed_ms": exposed, "disagreement": disagreement,
            "peak_stash": last.get("peak_stash", {})}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    p.add_argument("--bin")
    p.add_argument("--rounds", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--leads", type=int, nargs="+")
    p.add_argument("--only", default="",
                   help="run only the variants whose names match this regular expression (the "
                        "summary needs overlap-off-lead0, the smallest lead and its free link)")
    p.add_argument("--zeropp", action="store_true",
                   help="also run the ZeroPP plan with prefetched gathers and with overlap off")
    p.add_argument("--segments", type=int, nargs="*", default=[],
                   help="segment sizes (KiB) to run at the largest lead with a BF16 wire (the "
                        "cluster's chips have no FP8)")
    a = p.parse_args()
    a.leads = sorted(a.leads)
    free = free_cluster(a.out)
    # (name, cluster, plan, extra settings); overlap-off: blocking sends, the no-overlap baseline.
    off = ("--set", "parallel.overlap=false")
    variants = [("overlap-off-lead0", CLUSTER, plan_file(a.out, 0), off)]
    variants += [(f"lead{l}", CLUSTER, plan_file(a.out, l), ()) for l in a.leads]
    for l in sorted({a.leads[0], a.leads[-1]}):
        variants.append((f"free-link-lead{l}", free, plan_file(a.out, l), ()))
    for kb in a.segments:  # whole pieces (0) against segments, the wire codec per segment
        variants.append((f"lead{a.leads[-1]}-bf16-segment{kb}k", CLUSTER,
                         plan_file(a.out, a.leads[-1], "bf16"),
                         ("--set", f"parallel.segment_kb={kb}")))
    zeropp = [("zeropp-overlap-off", ZEROPP_CLUSTER, ZEROPP_PLAN, off),
              ("zeropp-prefetch", ZEROPP_CLUSTER, ZEROPP_PLAN, ())] if a.zeropp else []
    if a.only:
        variants = [v for v in variants if re.search(a.only, v[0])]
        zeropp = [v for v in zeropp if re.search(a.only, v[0])]
    runs = {v[0]: [] for v in variants + zeropp}
    for r in range(a.rounds):
        for name, cluster, plan, extra in variants + zeropp:
            print(f"== round {r + 1}/{a.rounds}: {name}", flush=True)
            runs[name].append(train(a, cluster, plan, f"{name}.{r + 1}", extra))
    def median_ms(name):  # nan for a variant --only left out
        xs = runs.get(name)
        return statistics.median(x["step_ms"] for x in xs) if xs else float("nan")
    free_ms = median_ms(f"free-link-lead{a.leads[0]}")
    base_ms = median_ms(f"lead{a.leads[0]}")
    off_ms = median_ms("overlap-off-lead0")
    _, detail = predict(a, CLUSTER, plan_file(a.out, 0))
    report = [f"# Overlap benchmark\n\nMachine: {cpu_flags()}\n",
              f"Cluster {CLUSTER} (cross-type link 9 MB/s), {JOB}, {a.steps} steps, "
              f"{a.rounds} rounds; step time: the median of the rounds' last logged interval.\n",
              "| variant | predicted ms | measured ms (median) | runs | vs compute-only | "
              f"speed-up over lead {a.leads[0]} | speed-up over overlap off | idle ms per rank | "
              "exposed comm ms per rank | peak stash | worst overrun |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, cluster, plan, extra in variants:
        xs = runs[name]
        ms = statistics.median(x["step_ms"] for x in xs)
        # The cost model plans overlapped runs only; the baseline has no prediction.
        predicted = float("nan") if extra else predict(a, cluster, plan)[0]
        idle = [round(statistics.median(x["idle_ms"][k] for x in xs)) for k in range(4)]
        exposed = [round(statistics.median(x["exposed_ms"][k] for x in xs)) for k in range(4)]
        report.append(
            f"| {name} | {predicted:.0f} | {ms:.0f} | {', '.join('%.0f' % x['step_ms'] for x in xs)}"
            f" | {ms / free_ms:.3f} | {base_ms / ms:.2f}x | {off_ms / ms:.2f}x | {idle} | {exposed} | "
            f"{xs[-1]['peak_stash']} | {100 * max(x['overrun'] for x in xs):.2f}% |")
    if zeropp:
        z_off = median_ms("zeropp-overlap-off")
        report += [f"\nZeroPP prefetch ({ZEROPP_CLUSTER}, {ZEROPP_PLAN}):\n",
                   "| variant | measured ms (median) | runs | speed-up over overlap off | "
                   "exposed comm ms per rank | worst overrun |", "|---|---|---|---|---|---|"]
        for name, _, _, _ in zeropp:
            xs = runs[name]
            ms = statistics.median(x["step_ms"] for x in xs)
            exposed = [round(statistics.median(x["exposed_ms"][k] for x in xs)) for k in range(4)]
            report.append(f"| {name} | {ms:.0f} | "
                          f"{', '.join('%.0f' % x['step_ms'] for x in xs)} | {z_off / ms:.2f}x | "
                          f"{exposed} | {100 * max(x['overrun'] for x in xs):.2f}% |")
    worst = max(x["disagreement"] for xs in runs.values() for x in xs)
    report.append(f"\nExposed communication in the metrics against the same figure recomputed from "
                  f"the Chrome trace (bench/overlap_bench.py, exposed_from_trace), ranks that "
                  f"waited over 1 ms, every run: worst disagreement {100 * worst:.2f}%.")
    report.append("\nThe cost model's view of the plain plan (h2 plan --evaluate):\n")
    report.append("```\n" + detail.strip() + "\n```")
    open(os.path.join(a.out, "summary.md"), "w").write("\n".join(report) + "\n")
    print("\n".join(report))


if __name__ == "__main__":
    main()
