#!/usr/bin/env python3
"""Loads `h2 export` folders with transformers.LlamaForCausalLM.from_pretrained (float32) and
compares its logits with `h2 logits` (max abs difference < 1e-4); a Llama-3-style folder (GQA,
llama3 RoPE scaling, several end tokens) saved by transformers imports with logits within 1e-5
of the logits' scale; an exported byte-level model runs in pipeline("text-generation") with
AutoTokenizer and continues a prompt as `h2 generate` does (greedy). It needs PyTorch and
transformers, which Debian does not package: CTest runs it as `check_transformers` when the build
is configured with -DH2_TRANSFORMERS_PYTHON=PYTHON (a Python that has them; scripts/build.sh passes
build/venv-transformers/bin/python where it exists, so that venv puts it in every later test run):

    python3 -m venv build/venv-transformers
    build/venv-transformers/bin/pip install torch transformers numpy safetensors
    bash scripts/build.sh && ctest --test-dir build -R check_transformers

or by hand: build/venv-transformers/bin/python tests/python/check_transformers.py build/bin/h2 .

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
LLAMA3_TOLERANCE = 1e-5  # of the logits' scale (at least 1): both sides compute in float32


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

    # A Llama-3-style folder: GQA, llama3 RoPE scaling (short original context, so every band is
    # used), several end tokens, as transformers itself saves it; imported, same logits.
    llama3 = dict(config, bos_token_id=1, eos_token_id=[2, 3], max_position_embeddings=64)
    llama3["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8,
                              "rope_theta": config["rope_theta"]}
    llama3.pop("rope_parameters", None)
    os.makedirs(d("llama3_src"))
    # Embeddings halved: logits of units to tens, as a trained model's.
    modest = {n: v * 0.5 if "embed" in n or "lm_head" in n else v for n, v in big.items()}
    llama_numpy.write_safetensors(os.path.join(d("llama3_src"), "model.safetensors"), modest,
                                  metadata={"format": "pt"})
    with open(os.path.join(d("llama3_src"), "config.json"), "w") as f:
        json.dump(llama3, f)
    save_with_transformers(d("llama3_src"), d("llama3"))
    h2(binary, "import", d("llama3"), "--out", d("llama3_run"))
    ours = hf_reference.h2_logits(binary, d("llama3_run"), ids, os.path.join(work, "l3.npy"))
    theirs = transformers_logits(d("llama3"), ids)
    diff = np.abs(ours - theirs).max()
    hf_reference.check(diff < LLAMA3_TOLERANCE * max(1.0, np.abs(theirs).max()),
                       f"{tag}: Llama-3 folder (llama3 RoPE scaling), h2 logits vs transformers: "
                       f"max |diff| {diff:.2e} (logits up to {np.abs(theirs).max():.1f})")
    diffs.append(diff)
    return max(diffs)


def check_text_generation(binary, root, work):
    """A byte-level model trained by h2 and exported runs in pipeline("text-generation") as it
    is: AutoTokenizer loads its tokenizer.json, the continuation equals h2 generate's (greedy)."""
    h2 = hf_reference.h2
    run, folder = os.path.join(work, "gen_run"), os.path.join(work, "gen_hf")
    h2(binary, "train", os.path.join(root, "configs/train/tiny.yaml"), "--set", "train.steps=150",
       "--set", "train.eval_every=0", "--set", f"checkpoint.dir={run}", "--set",
       "log.metrics_file=")
    h2(binary, "export", run, "--out", folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    prompt = "This License "
    hf_reference.check(tokenizer(prompt)["input_ids"] == list(prompt.encode()),
                       "AutoTokenizer of an exported byte-level model: one id per byte")
    generate = transformers.pipeline("text-generation", model=folder, tokenizer=tokenizer,
                                     dtype=torch.float32)
    text = generate(prompt, max_new_tokens=24, do_sample=False)[0]["generated_text"]
    ours = h2(binary, "generate", run, "--prompt", prompt, "--tokens", "24",
              "--temperature", "0").stdout
    hf_reference.check(text.startswith(prompt) and len(text) > len(prompt),
                       f"pipeline('text-generation') continues the prompt: {text!r}")
    hf_reference.check(ours.startswith(text),
                       f"its greedy text equals h2 generate's: {text!r} vs {ours!r}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    with tempfile.TemporaryDirectory(prefix="h2_check_transformers_") as work:
        os.chdir(work)
        worst = max(run_case(binary, root, work, tied) for tied in (True, False))
        check_text_generation(binary, root, work)
    if hf_reference.FAILURES:
        sys.exit(f"check_transformers: {len(hf_reference.FAILURES)} check(s) failed")
    print(f"check_transformers: all checks passed; largest max |diff| {worst:.2e}")


if __name__ == "__main__":
    main()
