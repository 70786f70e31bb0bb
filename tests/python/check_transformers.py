#!/usr/bin/env python3
"""Loads `h2 export` folders with transformers.LlamaForCausalLM.from_pretrained (float32) and
compares its logits with `h2 logits` (max abs difference < 1e-4). Not part of CI: it needs
PyTorch and transformers, which Debian does not package. Run it by hand:

    python3 -m venv .venv-hf
    .venv-hf/bin/pip install --index-url https://download.pytorch.org/whl/cpu torch
    .venv-hf/bin/pip install transformers numpy safetensors
    .venv-hf/bin/python tests/python/check_transformers.py build/bin/h2 .

For a small GQA model, tied and untied, it trains 2 steps with `h2 train` and exports; then, as
tests/python/hf_reference.py does, replaces the weights by larger random ones (sharp attention, so
the rotary layout matters) and imports them; each export (f32, bf16, sharded) is loaded by
transformers and compared with `h2 logits` of the same folder. Last, transformers' own
save_pretrained output is imported with `h2 import` and must give the same logits.

Usage: check_transformers.py H2_BINARY REPO_ROOT
"""

import json
import os
import sys
import tempfile

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference  # noqa: E402
import llama_numpy  # noqa: E402

TOLERANCE = 1e-4


def transformers_logits(folder, ids):
    model = transformers.LlamaForCausalLM.from_pretrained(
        folder, torch_dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    with torch.no_grad():
        out = model(torch.tensor([ids], dtype=torch.long)).logits[0]
    return out.double().numpy()


def save_with_transformers(source, target):
    """The folder as transformers itself writes it (save_pretrained), for `h2 import`."""
    model = transformers.LlamaForCausalLM.from_pretrained(source, torch_dtype=torch.float32)
    model.save_pretrained(target)


def compare(binary, folder, ids, label, work):
    ours = hf_reference.h2_logits(binary, folder, ids, os.path.join(work, "logits.npy"))
    theirs = transformers_logits(folder, ids)
    diff = np.abs(ours - theirs).max()
    hf_reference.check(diff < TOLERANCE, f"{label}: h2 logits vs transformers: max |diff| {diff:.2e}"
                       f" (logits up to {np.abs(theirs).max():.1f})")
    return diff


def run_case(binary, root, work, tied):
    tag = "tied" if tied else "untied"
    d = lambda name: os.path.join(work, f"{tag}_{name}")  # noqa: E731
    h2 = hf_reference.h2
    hf_reference.train_small_model(binary, root, d("run"), tied)
    ids = [int(i) for i in np.random.default_rng(3).integers(0, 256, size=16)]
    diffs = []
    h2(binary, "export", d("run"), "--out", d("hf"))
    diffs.append(compare(binary, d("hf"), ids, f"{tag} trained", work))

    config, weights = llama_numpy.load_hf_folder(d("hf"))
    big = hf_reference.randomize(config, weights, seed=11 if tied else 12)
    os.makedirs(d("big"))
    llama_numpy.write_safetensors(os.path.join(d("big"), "model.safetensors"), big,
                                  metadata={"format": "pt"})
    with open(os.path.join(d("big"), "config.json"), "w") as f:
        json.dump(config, f)
    h2(binary, "import", d("big"), "--out", d("big_run"))
    h2(binary, "export", d("big_run"), "--out", d("f32"))
    diffs.append(compare(binary, d("f32"), ids, f"{tag} random f32", work))
    h2(binary, "export", d("big_run"), "--out", d("bf16"), "--dtype", "bf16")
    diffs.append(compare(binary, d("bf16"), ids, f"{tag} random bf16 weights", work))
    h2(binary, "export", d("big_run"), "--out", d("sharded"), "--shard-size", "20K")
    diffs.append(compare(binary, d("sharded"), ids, f"{tag} random sharded", work))

    # A folder written by transformers' save_pretrained, imported: the same logits as before.
    save_with_transformers(d("f32"), d("saved"))
    h2(binary, "import", d("saved"), "--out", d("saved_run"))
    before = hf_reference.h2_logits(binary, d("big_run"), ids, os.path.join(work, "before.npy"))
    after = hf_reference.h2_logits(binary, d("saved_run"), ids, os.path.join(work, "after.npy"))
    hf_reference.check(np.array_equal(before, after),
                       f"{tag}: h2 import of transformers' save_pretrained gives the same logits")
    return max(diffs)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    with tempfile.TemporaryDirectory(prefix="h2_check_transformers_") as work:
        os.chdir(work)
        worst = max(run_case(binary, root, work, tied) for tied in (True, False))
    if hf_reference.FAILURES:
        sys.exit(f"check_transformers: {len(hf_reference.FAILURES)} check(s) failed")
    print(f"check_transformers: all checks passed; largest max |diff| {worst:.2e}")


if __name__ == "__main__":
    main()
