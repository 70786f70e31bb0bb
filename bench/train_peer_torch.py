#!/usr/bin/env python3
"""PyTorch peer of `h2 train`: a Llama of the same architecture as H2's (token embedding,
n_layers x [RMSNorm, GQA attention with rotary embedding (rotate_half) and
scaled_dot_product_attention(is_causal=True), RMSNorm, SwiGLU MLP], final RMSNorm (F.rms_norm
where PyTorch has it), LM head tied to or untied from the embedding, no biases), float32 on the
CPU with torch.set_num_threads (--threads), eager or torch.compile'd (--compile), trained with
AdamW (fused where the CPU build has it, else foreach), global gradient-norm clipping and
cross-entropy on random tokens. Runs --warmup untimed steps, then --steps timed ones, and prints
one JSON line: tokens_per_s (all timed steps), step_ms (median) and every timed step's time
(step_ms_all), parameters and the settings.
Peak memory is measured outside (/usr/bin/time -f %M)."""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        if hasattr(F, "rms_norm"):  # PyTorch 2.4+: the fused kernel a user would call
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_tables(seq_len, head_dim, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, D)
    return emb.cos(), emb.sin()


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.h, self.kv, self.d = a.n_heads, a.n_kv_heads, a.dim // a.n_heads
        self.wq = nn.Linear(a.dim, self.h * self.d, bias=False)
        self.wk = nn.Linear(a.dim, self.kv * self.d, bias=False)
        self.wv = nn.Linear(a.dim, self.kv * self.d, bias=False)
        self.wo = nn.Linear(self.h * self.d, a.dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.h, self.d).transpose(1, 2)
        k = self.wk(x).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.wv(x).view(b, t, self.kv, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.kv != self.h:
            k = k.repeat_interleave(self.h // self.kv, dim=1)
            v = v.repeat_interleave(self.h // self.kv, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, t, self.h * self.d))


class MLP(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.gate = nn.Linear(a.dim, a.ffn_dim, bias=False)
        self.up = nn.Linear(a.dim, a.ffn_dim, bias=False)
        self.down = nn.Linear(a.ffn_dim, a.dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.attn_norm = RMSNorm(a.dim, a.norm_eps)
        self.attn = Attention(a)
        self.mlp_norm = RMSNorm(a.dim, a.norm_eps)
        self.mlp = MLP(a)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed = nn.Embedding(a.vocab_size, a.dim)
        self.blocks = nn.ModuleList(Block(a) for _ in range(a.n_layers))
        self.norm = RMSNorm(a.dim, a.norm_eps)
        self.head = nn.Linear(a.dim, a.vocab_size, bias=False)
        if a.tie_embeddings:
            self.head.weight = self.embed.weight
        cos, sin = rope_tables(a.seq_len, a.dim // a.n_heads, a.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        t = idx.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.embed(idx)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.head(self.norm(x))


def make_optimizer(params, lr, wd):
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd, fused=True), "fused"
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd, foreach=True), "foreach"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab-size", type=int, default=256)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--n-layers", type=int, default=4)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--n-kv-heads", type=int, default=0, help="0: same as --n-heads")
    p.add_argument("--ffn-dim", type=int, default=344)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--untied", action="store_true", help="separate LM head (default: tied)")
    p.add_argument("--steps", type=int, default=40, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0, help="0 disables")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--autocast-bf16", action="store_true",
                   help="forward under torch.autocast(cpu, bfloat16): BF16 GEMMs, FP32 weights")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (Inductor; compiled during the warm-up steps)")
    a = p.parse_args()
    a.n_kv_heads = a.n_kv_heads or a.n_heads
    a.tie_embeddings = not a.untied
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = Llama(a)
    n_params = sum(x.numel() for x in model.parameters())
    opt, opt_kind = make_optimizer(model.parameters(), a.lr, a.weight_decay)
    forward = torch.compile(model) if a.compile else model
    g = torch.Generator().manual_seed(a.seed)
    # Random tokens: (steps + warmup) batches of (B, T + 1), inputs and shifted targets.
    data = torch.randint(0, a.vocab_size, (a.warmup + a.steps, a.batch_size, a.seq_len + 1),
                         generator=g)

    def step(i):
        x, y = data[i, :, :-1], data[i, :, 1:]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast_bf16):
            logits = forward(x)
        loss = F.cross_entropy(logits.float().view(-1, a.vocab_size), y.reshape(-1))
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for i in range(a.warmup):
        step(i)
    times = []
    loss = math.nan
    for i in range(a.warmup, a.warmup + a.steps):
        start = time.perf_counter()
        loss = step(i)
        times.append(time.perf_counter() - start)
    tokens = a.batch_size * a.seq_len
    print(json.dumps({
        "peer": "torch", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "optimizer": "AdamW " + opt_kind, "autocast_bf16": a.autocast_bf16, "compiled": a.compile,
        "parameters": n_params,
        "tied": a.tie_embeddings, "tokens_per_step": tokens, "warmup": a.warmup,
        "steps": a.steps, "step_ms": 1e3 * statistics.median(times),
        "tokens_per_s": tokens * len(times) / sum(times),
        "tokens_per_s_median_step": tokens / statistics.median(times), "final_loss": loss,
        "step_ms_all": [round(1e3 * t, 3) for t in times],
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "unset"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "unset"),
    }))


if __name__ == "__main__":
    main()
