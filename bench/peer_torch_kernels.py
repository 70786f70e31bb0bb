#!/usr/bin/env python3
"""PyTorch peer of h2_bench_kernels: the same GEMM peak, training-step GEMM table and causal
attention forward + backward, on the CPU with torch.set_num_threads(--threads), each figure the
median of --repeats timed calls after --warmup untimed ones (peak: best of --peak-repeats).
GEMMs use torch.matmul with the same shapes and transposes (W stored (out, in): fwd X @ W.t(),
dX = dY @ W, dW = dY.t() @ X); attention uses scaled_dot_product_attention(is_causal=True) on
(B, T, H, D) tensors viewed as (B, H, T, D), FLOPs counted as in H2's core/op_cost.cpp."""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def time_runs(fn, warmup, repeats, setup=lambda: None):
    """Seconds of each timed fn(setup()) call; setup runs untimed before each call."""
    for _ in range(warmup):
        fn(setup())
    seconds = []
    for _ in range(repeats):
        state = setup()
        start = time.perf_counter()
        fn(state)
        seconds.append(time.perf_counter() - start)
    return seconds


def rand(shape, dtype, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return ((torch.rand(shape, generator=g) * 2 - 1) * scale).to(dtype)


def run_gemm(m, n, k, trans_a, trans_b, dtype, warmup, repeats, best_of=False):
    a = rand((k, m) if trans_a else (m, k), dtype, 1)
    b = rand((n, k) if trans_b else (k, n), dtype, 2, 0.05)
    op_a = a.t() if trans_a else a
    op_b = b.t() if trans_b else b
    out = torch.empty((m, n), dtype=dtype)
    s = time_runs(lambda _: torch.matmul(op_a, op_b, out=out), warmup, repeats)
    return (min(s) if best_of else statistics.median(s)), 2.0 * m * n * k


def measure_peak(args):
    print(f"## GEMM peak (torch.matmul, f32, best of {args.peak_repeats})\n")
    print("| size | ms (best) | GFLOP/s |\n|---|---:|---:|")
    peak = 0.0
    for n in (2048, 4096):
        sec, flops = run_gemm(n, n, n, False, False, torch.float32, 1, args.peak_repeats, True)
        peak = max(peak, flops / sec / 1e9)
        print(f"| {n}^3 | {sec * 1e3:.1f} | {flops / sec / 1e9:.1f} |")
    print(f"\nMeasured peak: {peak:.1f} GFLOP/s\n")
    return peak


def training_step_gemms(tokens):
    c, f, v, layers = 768, 2048, 50257, 12
    gemms = []
    for name, d_in, d_out, per_step in (("q/k/v/o", c, c, 4 * layers), ("gate/up", c, f, 2 * layers),
                                        ("down", f, c, layers), ("lm_head", c, v, 1)):
        gemms.append((name + " fwd", tokens, d_out, d_in, False, True, per_step))
        gemms.append((name + " dX", tokens, d_in, d_out, False, False, per_step))
        gemms.append((name + " dW", d_out, d_in, tokens, True, False, per_step))
    return gemms


def gemm_table(args, peak):
    dtype = DTYPES[args.gemm_dtype]
    print(f"## Training-step GEMMs ({args.gemm_dtype}, {args.tokens} tokens, median of "
          f"{args.repeats})\n")
    print("| GEMM | M x N x K | op | per step | ms | GFLOP/s | % of peak |")
    print("|---|---|---|---:|---:|---:|---:|")
    step_flops = step_sec = 0.0
    for name, m, n, k, ta, tb, per_step in training_step_gemms(args.tokens):
        sec, flops = run_gemm(m, n, k, ta, tb, dtype, args.warmup, args.repeats)
        op = "A^T B" if ta else "A B^T" if tb else "A B"
        gflops = flops / sec / 1e9
        pct = f"{100 * gflops / peak:.0f}%" if peak > 0 else "-"
        print(f"| {name} | {m} x {n} x {k} | {op} | {per_step} | {sec * 1e3:.2f} | {gflops:.1f} "
              f"| {pct} |")
        step_flops += flops * per_step
        step_sec += sec * per_step
    gflops = step_flops / step_sec / 1e9
    pct = f" ({100 * gflops / peak:.0f}% of peak)" if peak > 0 else ""
    print(f"\nOne step's GEMMs: {step_flops / 1e9:.1f} GFLOP in {step_sec * 1e3:.0f} ms = "
          f"{gflops:.1f} GFLOP/s{pct}\n")


def attention_row(b, t, h, d, dtype_name, args):
    dtype = DTYPES[dtype_name]
    # (B, T, H, D) storage as in H2, viewed as (B, H, T, D) for SDPA.
    q, k, v, dout = (rand((b, t, h, d), dtype, s).transpose(1, 2) for s in (11, 12, 13, 14))
    qg, kg, vg = (x.detach().requires_grad_(True) for x in (q, k, v))

    def fwd(_):
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def graph():  # an untimed forward that records what backward needs
        qg.grad = kg.grad = vg.grad = None
        return F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)

    f_sec = statistics.median(time_runs(fwd, args.warmup, args.repeats))
    bwd_sec = statistics.median(time_runs(lambda out: out.backward(dout), args.warmup,
                                          args.repeats, graph))
    fb_sec = f_sec + bwd_sec
    pairs = b * h * t * (t + 1) / 2
    flops_f, flops_b = 4 * d * pairs, 10 * d * pairs
    tokens = b * t
    print(f"| B={b} T={t} H={h} D={d} | {dtype_name} | {f_sec * 1e3:.2f} | {bwd_sec * 1e3:.2f} "
          f"| {fb_sec / tokens * 1e6:.1f} | {flops_f / f_sec / 1e9:.1f} | "
          f"{flops_b / bwd_sec / 1e9:.1f} | {(flops_f + flops_b) / fb_sec / 1e9:.1f} |")


def attention_table(args):
    print(f"## Causal attention forward + backward (SDPA, median of {args.repeats})\n")
    print("| shape | dtype | fwd ms | bwd ms | fwd+bwd us/token | fwd GFLOP/s | bwd GFLOP/s "
          "| fwd+bwd GFLOP/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for b, t, h, d in ((2, 256, 12, 64), (1, 2048, 12, 64)):
        for dtype_name in ("f32", "bf16"):
            attention_row(b, t, h, d, dtype_name, args)
    print("\nfwd: under no_grad; bwd: out.backward(dout) after an untimed autograd forward. "
          "FLOPs as H2's op_cost (causal T(T+1)/2 pairs; fwd 4D, bwd 10D per pair).\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="timed calls per figure (median)")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls before timing")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--peak-repeats", type=int, default=3, help="calls per peak GEMM (best)")
    p.add_argument("--peak-gflops", type=float, default=0, help="use this peak, do not measure")
    p.add_argument("--gemm-dtype", choices=sorted(DTYPES), default="f32")
    p.add_argument("--sections", default="peak,gemm,attention",
                   help="comma-separated subset of peak, gemm, attention")
    p.add_argument("--tokens", type=int, default=512, help="batch x sequence (2 x 256)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    sections = args.sections.split(",")
    print("# PyTorch CPU kernel benchmark (peer of h2_bench_kernels)\n")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"OPENBLAS_CORETYPE {os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
          f"OPENBLAS_L2_SIZE {os.environ.get('OPENBLAS_L2_SIZE', 'unset')}\n")
    peak = args.peak_gflops
    if peak <= 0 and "peak" in sections:
        peak = measure_peak(args)
    if "gemm" in sections:
        gemm_table(args, peak)
    if "attention" in sections:
        attention_table(args)


if __name__ == "__main__":
    main()
