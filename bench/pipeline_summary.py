#!/usr/bin/env python3
"""Summarises bench/pipeline_bench.sh runs (OUT_DIR/VARIANT.ROUND.{jsonl,time,trace.json}).

Per run, from the metrics file: tokens/s and step ms over every logged interval after the first
(the first is warm-up): tokens / seconds and seconds / steps of those intervals; the measured
bubble (each logged line carries the job's bubble of its last step): median over those lines;
peak stashed activations per stage: the maximum over all lines. Per variant: the median over
its runs. From the trace of each variant's last run: per rank, the median compute times (F, B:
inputs ready to end, waits excluded), FSDP and send/recv time per step, and busy time as a
share of the job's step span; a 1F1B simulation with those per-stage times predicts the step
span and bubble. Variants NAME-ts0 / NAME-ts2 (H2_VCHIP_TIME_SCALE 0 / 2) show how much of the
action times the pacing decides. Usage: pipeline_summary.py OUT_DIR"""
import collections
import glob
import json
import os
import statistics
import sys

MAIN = ["balanced", "uniform", "split-4-0", "split-1-3", "equal", "equal-wide"]
PLANS = {
    "balanced": "chip-a x2: embedding + blocks 0-2 / chip-b x2: block 3 + head (3,1)",
    "uniform": "chip-a x2: embedding + blocks 0-1 / chip-b x2: blocks 2-3 + head (2,2)",
    "split-4-0": "chip-a x2: embedding + blocks 0-3 / chip-b x2: head (4,0)",
    "split-1-3": "chip-a x2: embedding + block 0 / chip-b x2: blocks 1-3 + head (1,3)",
    "equal": "4 x chip-a, 1 rank per stage, no FSDP, dim 256 (1,1,1,1)",
    "equal-wide": "4 x chip-a, 1 rank per stage, no FSDP, dim 512 (1,1,1,1)",
}
med = statistics.median


def runs_of(out):
    """{variant: [(round, path without extension)]}, rounds in order."""
    runs = collections.defaultdict(list)
    for path in glob.glob(f"{out}/*.jsonl"):
        name = os.path.basename(path)[: -len(".jsonl")]
        variant, _, rnd = name.rpartition(".")
        if variant and rnd.isdigit():
            runs[variant].append((int(rnd), path[: -len(".jsonl")]))
    return {v: sorted(r) for v, r in runs.items()}


def metrics(base):
    lines = [json.loads(x) for x in open(base + ".jsonl") if x.strip()]
    steps = [x for x in lines if x.get("event") == "step"]
    prev = [0] + [x["step"] for x in steps[:-1]]
    intervals = [(x, x["step"] - p) for x, p in zip(steps, prev)][1:]  # first: warm-up
    if not intervals:
        raise SystemExit(f"{base}.jsonl: fewer than two logged intervals")
    seconds = [x["step_ms"] * n / 1e3 for x, n in intervals]
    tokens = sum(x["tokens_per_s"] * s for (x, _), s in zip(intervals, seconds))
    stash = {}
    for x in steps:
        for stage, peak in x.get("peak_stash", {}).items():
            stash[int(stage)] = max(stash.get(int(stage), 0), peak)
    peaks = [stash[s] for s in sorted(stash)]
    r = {"tok_s": tokens / sum(seconds),
         "step_ms": 1e3 * sum(seconds) / sum(n for _, n in intervals),
         "bubble": med(x["bubble"] for x, _ in intervals) if "bubble" in steps[0] else None,
         "stash": peaks,
         "stash_constant": all(
             [x.get("peak_stash", {}).get(str(s)) for s in sorted(stash)] == peaks
             for x in steps[1:]),
         "loss": steps[-1]["loss"]}
    try:
        wall, user, system = map(float, open(base + ".time").read().splitlines()[-1].split()[:3])
        r["cores"] = (user + system) / wall
    except (OSError, ValueError):
        r["cores"] = None
    return r


def trace(base):
    """Per rank: stage, median F/B ms, per-step FSDP and comm ms, busy ms per step; job step
    spans. None if the run has no trace."""
    try:
        events = json.load(open(base + ".trace.json"))["traceEvents"]
    except OSError:
        return None
    events = [e for e in events if e.get("ph") == "X" and e.get("cat") != "wait"]
    ranks = collections.defaultdict(lambda: {
        "F": [], "B": [], "pre": [], "post": [], "send": [], "stages": set(),
        "fsdp": collections.Counter(), "comm": collections.Counter(),
        "busy": collections.Counter()})
    span = {}
    for e in events:
        r, step = ranks[e["pid"]], e["args"]["step"]
        end = e["ts"] + e["dur"]
        lo, hi = span.get(step, (e["ts"], end))
        span[step] = (min(lo, e["ts"]), max(hi, end))
        if e["cat"] == "compute":
            busy = e["dur"] - e["args"].get("wait_us", 0.0)
            r[e["name"][0]].append(busy)
            r["busy"][step] += busy
            r["stages"].add(int(e["name"][1:].split(".")[0]))
        elif e["cat"] == "fsdp":
            r["fsdp"][step] += e["dur"]
            (r["pre"] if e["name"].startswith("UNSHARD") else r["post"]).append(e["dur"])
        else:
            r["comm"][step] += e["dur"]
            if e["name"].startswith("SEND"):
                r["send"].append(e["dur"])
    steps = sorted(span)
    out = {"steps": (steps[0], steps[-1]),
           "span_ms": med(hi - lo for lo, hi in span.values()) / 1e3, "ranks": {}}
    for pid, r in sorted(ranks.items()):
        n = len(steps)
        out["ranks"][pid] = {
            "stage": min(r["stages"]) if r["stages"] else None,
            "F": med(r["F"]) / 1e3 if r["F"] else 0.0, "B": med(r["B"]) / 1e3 if r["B"] else 0.0,
            "per_step_F": len(r["F"]) // n, "per_step_B": len(r["B"]) // n,
            "fsdp": sum(r["fsdp"].values()) / n / 1e3, "comm": sum(r["comm"].values()) / n / 1e3,
            "pre": med(r["pre"]) / 1e3 if r["pre"] else 0.0,
            "post": sum(r["post"]) / n / 1e3, "send": med(r["send"]) / 1e3 if r["send"] else 0.0,
            "busy": sum(r["busy"].values()) / n / 1e3}
    return out


def simulate_1f1b(f, b, m, pre=None, post=None, send=None):
    """1F1B (warm-up p - s - 1 forwards) with per-stage forward / backward times f[s], b[s] (and
    optional per-stage time before the first action, after the last, and per send): returns the
    step span and the bubble 1 - sum(busy) / (p * span)."""
    p = len(f)
    pre, post, send = pre or [0.0] * p, post or [0.0] * p, send or [0.0] * p
    order = []
    for s in range(p):
        w = min(p - s - 1, m)
        acts = [("F", j) for j in range(w)]
        for j in range(m - w):
            acts += [("F", w + j), ("B", j)]
        acts += [("B", j) for j in range(m - w, m)]
        order.append(acts)
    done, free, pos = {}, list(pre), [0] * p
    while any(pos[s] < len(order[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            if pos[s] == len(order[s]):
                continue
            kind, j = order[s][pos[s]]
            dep = (("F", s - 1, j) if s > 0 else None) if kind == "F" else (
                ("B", s + 1, j) if s < p - 1 else ("F", s, j))
            if dep is not None and dep not in done:
                continue
            start = max(free[s], done[dep] if dep else 0.0)
            end = start + (f[s] if kind == "F" else b[s])
            sends = (kind == "F" and s < p - 1) or (kind == "B" and s > 0)
            done[(kind, s, j)] = end + (send[s] if sends else 0.0)
            free[s] = done[(kind, s, j)]
            pos[s] += 1
            progressed = True
        if not progressed:
            raise RuntimeError("1F1B simulation deadlocked")
    end = max(free[s] + post[s] for s in range(p))
    busy = sum(m * (f[s] + b[s]) for s in range(p))
    return end, 1.0 - busy / (p * end)


def stage_times(tr):
    """Per stage (in order): mean over the stage's ranks of F, B, pre, post, send."""
    by = collections.defaultdict(list)
    for r in tr["ranks"].values():
        by[r["stage"]].append(r)
    keys = ("F", "B", "pre", "post", "send")
    return {k: [statistics.mean(r[k] for r in by[s]) for s in sorted(by)] for k in keys}


def fmt_stash(stash):
    return "/".join(str(x) for x in stash) if stash else "-"


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def main():
    out = sys.argv[1]
    runs = runs_of(out)
    res = {v: [(rnd, base, metrics(base)) for rnd, base in rs] for v, rs in runs.items()}
    order = [v for v in MAIN if v in res] + sorted(v for v in res if v not in MAIN)

    print("| variant | plan (stage_layers) | runs | tokens/s | step ms | bubble "
          "| peak stash per stage | CPU cores used | tokens/s per run |")
    print("|---|---|---:|---:|---:|---:|---|---:|---|")
    for v in order:
        rs = [m for _, _, m in res[v]]
        stashes = ", ".join(sorted({fmt_stash(m["stash"]) for m in rs}))
        if not all(m["stash_constant"] for m in rs):
            stashes += " (varied)"
        cores = [m["cores"] for m in rs if m["cores"] is not None]
        plan, _, scale = v.partition("-ts")
        plan = PLANS.get(plan, "") + (f" at H2_VCHIP_TIME_SCALE={scale}" if scale else "")
        bubble = med(m["bubble"] for m in rs) if rs[0]["bubble"] is not None else None
        per_run = " / ".join(f"{m['tok_s']:,.0f}" for m in rs)
        cores = f"{med(cores):.2f}" if cores else "-"
        print(f"| {v} | {plan} | {len(rs)} | {med(m['tok_s'] for m in rs):,.0f} | "
              f"{med(m['step_ms'] for m in rs):.1f} | {pct(bubble)} | {stashes} | "
              f"{cores} | {per_run} |")
    if "balanced" in res and "uniform" in res:
        b = med(m["tok_s"] for _, _, m in res["balanced"])
        u = med(m["tok_s"] for _, _, m in res["uniform"])
        ub = {rnd: m["tok_s"] for rnd, _, m in res["uniform"]}
        paired = [m["tok_s"] / ub[rnd] for rnd, _, m in res["balanced"] if rnd in ub]
        print(f"\n**balanced / uniform tokens/s: {b / u:.3f}x** ({b:,.0f} / {u:,.0f}; per round: "
              + ", ".join(f"{x:.3f}" for x in paired) + ")")
    print("\nPer run (tokens/s, step ms, bubble):")
    for v in order:
        print(f"- {v}: " + "; ".join(
            f"round {rnd}: {m['tok_s']:,.0f}, {m['step_ms']:.1f} ms, {pct(m['bubble'])}"
            for rnd, _, m in res[v]))

    for v in [v for v in order if v.startswith("equal")]:
        rs = [m for _, _, m in res[v]]
        p = len(rs[0]["stash"])
        tr = trace(res[v][-1][1])
        mb = tr["ranks"][0]["per_step_F"] if tr else 8  # micro-batches per step
        predicted = (p - 1) / (mb + p - 1)
        bubble = med(m["bubble"] for m in rs)
        want = [min(p - s, mb) for s in range(p)]
        print(f"\n**1F1B on equal chips, {v} (p = {p}, m = {mb}):** measured bubble {pct(bubble)} "
              f"(runs: {', '.join(pct(m['bubble']) for m in rs)}) against (p-1)/(m+p-1) = "
              f"{pct(predicted)}: {100 * (bubble / predicted - 1):+.1f}% relative, "
              f"{'within' if abs(bubble / predicted - 1) <= 0.10 else 'NOT within'} 10%; "
              f"peak stashes {fmt_stash(rs[0]['stash'])} against {fmt_stash(want)}: "
              f"{'equal' if all(m['stash'] == want for m in rs) else 'DIFFERENT'} in every run.")
        if tr:
            st = stage_times(tr)
            f0 = statistics.mean(st["F"][:-1])
            b0 = statistics.mean(st["B"][:-1])
            _, same = simulate_1f1b([f0] * p, [b0] * p, mb, send=st["send"])
            print(f"The last stage (block + head) takes {st['F'][-1] / f0 - 1:+.1%} (F) and "
                  f"{st['B'][-1] / b0 - 1:+.1%} (B) against the other stages' mean; 1F1B "
                  f"simulated with every stage at that mean (sends included): {pct(same)}.")

    print("\nFrom each variant's last trace (per rank: median F and B ms, waits excluded; FSDP "
          "(UNSHARD + REDUCE_GRAD + RESHARD) and send/recv ms per step; busy = compute ms per step "
          "over the job's median step span):\n")
    print("| variant | trace | steps | rank | stage | F ms | B ms | FSDP ms/step | comm ms/step "
          "| busy ms/step | busy share of span |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    sims = {}
    for v in order:
        _, base, m = res[v][-1]
        tr = trace(base)
        if tr is None:
            continue
        for pid, r in tr["ranks"].items():
            print(f"| {v} | `{os.path.basename(base)}.trace.json` | "
                  f"{tr['steps'][0]}-{tr['steps'][1]} | {pid} | {r['stage']} | {r['F']:.2f} | "
                  f"{r['B']:.2f} | {r['fsdp']:.2f} | "
                  f"{r['comm']:.2f} | {r['busy']:.1f} | {r['busy'] / tr['span_ms']:.1%} |")
        st = stage_times(tr)
        mb = tr["ranks"][0]["per_step_F"]
        span, bub = simulate_1f1b(st["F"], st["B"], mb, st["pre"], st["post"], st["send"])
        sims[v] = (tr["span_ms"], span, bub, m["bubble"], st)
    print("\n1F1B simulated with each trace's per-stage times (F, B, UNSHARD before, REDUCE_GRAD "
          "after, sends) against the measured step span and bubble:\n")
    print("| variant | stage F ms | stage B ms | simulated span ms | measured span ms "
          "| simulated bubble | measured bubble |")
    print("|---|---|---|---:|---:|---:|---:|")
    for v, (meas, span, bub, mbub, st) in sims.items():
        print(f"| {v} | {' / '.join(f'{x:.2f}' for x in st['F'])} | "
              f"{' / '.join(f'{x:.2f}' for x in st['B'])} | {span:.1f} | {meas:.1f} | {pct(bub)} | "
              f"{pct(mbub)} |")

    paced = [v for v in res if v.endswith("-ts2") and v[:-4] in res]
    for v in paced:
        base_v = v[:-4]
        t1 = [trace(b) for _, b, _ in res[base_v]]
        t1 = [t for t in t1 if t]
        t2 = trace(res[v][-1][1])
        t0 = trace(res[base_v + "-ts0"][-1][1]) if base_v + "-ts0" in res else None
        if not t1 or t2 is None:
            continue
        print(f"\nPacing check ({base_v}): median compute time per action and stage at "
              "H2_VCHIP_TIME_SCALE 1 (all runs), 2 and 0 (no pacing: the CPU's own time, 4 ranks "
              "on the machine's cores); the share of the scale-1 time that pacing does not decide "
              "is 2 - t(2) / t(1) (0 when pacing decides all of it):\n")
        print("| stage | action | scale 1 ms | scale 2 ms | t(2)/t(1) | not paced | scale 0 ms | "
              "scale 0 / scale 1 |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
        s1 = [stage_times(t) for t in t1]
        s2 = stage_times(t2)
        s0 = stage_times(t0) if t0 else None
        for s in range(len(s2["F"])):
            for k in ("F", "B"):
                a = med(x[k][s] for x in s1)
                c = s2[k][s]
                z = s0[k][s] if s0 else None
                unpaced = "- | -" if z is None else f"{z:.2f} | {z / a:.0%}"
                print(f"| {s} | {k} | {a:.2f} | {c:.2f} | {c / a:.2f} | {2 - c / a:.0%} | "
                      f"{unpaced} |")


if __name__ == "__main__":
    main()
