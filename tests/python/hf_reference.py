#!/usr/bin/env python3
"""`h2 export` / `h2 import` / `h2 logits` against an independent NumPy Llama (llama_numpy.py).

For a small GQA model (4 query heads, 2 key/value heads), tied and untied: train 2 steps with
`h2 train`, export, and compare `h2 logits` with a float64 NumPy forward pass over the exported
config.json + safetensors (max abs difference < 1e-4). Then replace the weights by larger random
ones (so attention is sharp and the rotary layout matters), written by NumPy's own safetensors
writer, import them with `h2 import` and compare again; the reference with the other rotary layout
(interleaved pairs) must disagree, which shows the comparison can tell. Also checks that
export -> import -> export is byte-identical (f32, and bf16 of an imported bf16 export), that bf16
is round-to-nearest-even of the f32 values, that sharded exports load, and that a non-empty --out
is refused without --force.

Usage: hf_reference.py H2_BINARY REPO_ROOT      (exit 77: numpy missing, the test is skipped; 1 in CI)
"""

import filecmp
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from skip_or_fail import skip_or_fail  # noqa: E402

try:
    import numpy as np
except ImportError:
    skip_or_fail("hf_reference", "numpy is not installed (Debian: apt-get install python3-numpy)")
import llama_numpy  # noqa: E402

TOLERANCE = 1e-4
FAILURES = []


def check(ok, message):
    print(("ok   " if ok else "FAIL ") + message)
    if not ok:
        FAILURES.append(message)


def h2(binary, *args, expect=0):
    result = subprocess.run([binary, *args], capture_output=True, text=True)
    if result.returncode != expect:
        sys.exit(
            f"h2 {' '.join(args)} exited {result.returncode}, expected {expect}\n"
            f"{result.stdout}{result.stderr}"
        )
    return result


def h2_logits(binary, model, ids, out):
    h2(binary, "logits", model, "--ids", ",".join(map(str, ids)), "--out", out)
    return np.load(out).astype(np.float64)


def same_folder(a, b):
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(
        filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names
    )


def bf16_round(values):
    """Round-to-nearest-even of float32 values to bfloat16, as float64 (NaN-free input)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return (rounded.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def randomize(config, weights, seed):
    """Weights of the same shapes, large enough that attention is sharp and position-dependent."""
    rng = np.random.default_rng(seed)
    scale = {"q_proj": 0.3, "k_proj": 0.3, "embed_tokens": 1.0, "lm_head": 0.2}
    out = {}
    for name, w in weights.items():
        if name.endswith("norm.weight"):
            out[name] = 1 + 0.2 * rng.standard_normal(w.shape)
        else:
            key = next((k for k in scale if k in name), None)
            out[name] = scale.get(key, 0.15) * rng.standard_normal(w.shape)
        out[name] = out[name].astype(np.float32).astype(np.float64)
    return out


def train_small_model(binary, root, run_dir, tied):
    """Trains a small GQA model (4 heads, 2 kv heads) for 2 steps into checkpoint dir run_dir."""
    theta = "500" if tied else "10000"
    h2(binary, "train", os.path.join(root, "configs/train/tiny.yaml"),
       "--set", "train.steps=2", "--set", "train.batch_size=2", "--set", "train.eval_every=0",
       "--set", "log.every=1", "--set", "log.metrics_file=", "--set", "model.dim=32",
       "--set", "model.n_layers=2", "--set", "model.n_heads=4", "--set", "model.n_kv_heads=2",
       "--set", "model.ffn_dim=48", "--set", "model.seq_len=16",
       "--set", f"model.rope_theta={theta}", "--set", "model.norm_eps=1e-6",
       "--set", f"model.tie_embeddings={'true' if tied else 'false'}",
       "--set", f"checkpoint.dir={run_dir}")


def run_case(binary, root, work, tied):
    tag = "tied" if tied else "untied"
    d = lambda name: os.path.join(work, f"{tag}_{name}")  # noqa: E731
    train_small_model(binary, root, d("run"), tied)
    ids = list(np.random.default_rng(3).integers(0, 256, size=16))

    # The trained checkpoint, exported.
    h2(binary, "export", d("run"), "--format", "hf", "--out", d("hf"))
    config, weights = llama_numpy.load_hf_folder(d("hf"))
    check(config["num_key_value_heads"] == 2 and config["tie_word_embeddings"] == tied
          and ("lm_head.weight" in weights) != tied, f"{tag}: config.json and tensor list")
    diff = np.abs(h2_logits(binary, d("run"), ids, d("a.npy"))
                  - llama_numpy.forward(config, weights, ids)).max()
    check(diff < TOLERANCE, f"{tag}: trained checkpoint, h2 logits vs NumPy: max |diff| {diff:.2e}")

    # Larger random weights from NumPy's own writer (with transformers' metadata), imported.
    big = randomize(config, weights, seed=11 if tied else 12)
    os.makedirs(d("big"))
    llama_numpy.write_safetensors(os.path.join(d("big"), "model.safetensors"), big,
                                  metadata={"format": "pt"})
    with open(os.path.join(d("big"), "config.json"), "w") as f:
        json.dump(config, f)
    h2(binary, "import", d("big"), "--out", d("big_run"))
    from_h2 = h2_logits(binary, d("big_run"), ids, d("b.npy"))
    reference = llama_numpy.forward(config, big, ids)
    diff = np.abs(from_h2 - reference).max()
    check(diff < TOLERANCE, f"{tag}: imported random weights, h2 logits vs NumPy: max |diff| "
          f"{diff:.2e} (logits up to {np.abs(reference).max():.1f})")
    other = np.abs(from_h2 - llama_numpy.forward(config, big, ids, rotary="interleaved")).max()
    check(other > 1e-2, f"{tag}: the interleaved rotary layout disagrees (max |diff| {other:.2e})")
    direct = h2_logits(binary, d("big"), ids, d("c.npy"))
    check(np.array_equal(direct, from_h2), f"{tag}: h2 logits of the HF folder = of the import")

    # Llama 3: the same weights with llama3 RoPE scaling (a short original context, so every
    # frequency band is used at these positions) and special tokens, imported and compared.
    llama3 = dict(config, bos_token_id=1, eos_token_id=[2, 3], max_position_embeddings=64)
    llama3["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8}
    llama3.pop("rope_parameters", None)
    os.makedirs(d("llama3"))
    llama_numpy.write_safetensors(os.path.join(d("llama3"), "model.safetensors"), big)
    with open(os.path.join(d("llama3"), "config.json"), "w") as f:
        json.dump(llama3, f)
    h2(binary, "import", d("llama3"), "--out", d("llama3_run"))
    scaled = llama_numpy.forward(llama3, big, ids)
    diff = np.abs(h2_logits(binary, d("llama3_run"), ids, d("l3.npy")) - scaled).max()
    check(diff < 1e-5 * max(1.0, np.abs(scaled).max()),
          f"{tag}: llama3 RoPE scaling, h2 logits vs NumPy: max |diff| {diff:.2e}")
    plain = np.abs(scaled - reference).max()
    check(plain > 1e-2, f"{tag}: llama3 scaling changes the logits (max |diff| {plain:.2e})")
    h2(binary, "export", d("llama3_run"), "--out", d("llama3_hf"))
    with open(os.path.join(d("llama3_hf"), "config.json")) as f:
        back = json.load(f)
    with open(os.path.join(d("llama3_hf"), "generation_config.json")) as f:
        generation = json.load(f)
    check(back["rope_parameters"]["rope_type"] == "llama3" and back["rope_parameters"]["factor"] == 8
          and back["bos_token_id"] == 1 and back["eos_token_id"] == 2
          and generation["eos_token_id"] == 2 and back["dtype"] == "float32",
          f"{tag}: llama3 scaling and special tokens survive import -> export")

    # export -> import -> export is byte-identical: f32, and bf16 of an imported bf16 export.
    for dtype in ("f32", "bf16"):
        h2(binary, "export", d("big_run"), "--out", d(f"x_{dtype}"), "--dtype", dtype)
        h2(binary, "import", d(f"x_{dtype}"), "--out", d(f"y_{dtype}"))
        h2(binary, "export", d(f"y_{dtype}"), "--out", d(f"z_{dtype}"), "--dtype", dtype)
        check(same_folder(d(f"x_{dtype}"), d(f"z_{dtype}")),
              f"{tag}: export -> import -> export is byte-identical ({dtype})")
    _, exported = llama_numpy.load_hf_folder(d("x_f32"))
    check(all(np.array_equal(exported[n], big[n]) for n in big), f"{tag}: f32 export is exact")
    _, halved = llama_numpy.load_hf_folder(d("x_bf16"))
    check(all(np.array_equal(halved[n], bf16_round(big[n])) for n in big),
          f"{tag}: bf16 export is round-to-nearest-even of the f32 weights")

    # Sharded export: an index, several files, the same model.
    h2(binary, "export", d("big_run"), "--out", d("sharded"), "--shard-size", "20K")
    with open(os.path.join(d("sharded"), "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    files = sorted(set(weight_map.values()))
    _, sharded = llama_numpy.load_hf_folder(d("sharded"))
    check(len(files) > 2 and sorted(weight_map) == sorted(big)
          and all(np.array_equal(sharded[n], big[n]) for n in big),
          f"{tag}: sharded export ({len(files)} files) holds every tensor once")
    check(np.array_equal(h2_logits(binary, d("sharded"), ids, d("s.npy")), from_h2),
          f"{tag}: h2 logits of the sharded folder = of the single file")

    # A non-empty --out is refused (exit 2) unless --force.
    err = h2(binary, "export", d("big_run"), "--out", d("sharded"), expect=2).stderr
    check("--force" in err, f"{tag}: export refuses a non-empty --out")
    # (No tokenizer: the imported folder came without one, so none is made up for it.)
    h2(binary, "export", d("big_run"), "--out", d("sharded"), "--force")
    check(sorted(os.listdir(d("sharded"))) == ["config.json", "generation_config.json",
                                               "model.safetensors"],
          f"{tag}: --force replaces the earlier shards")
    h2(binary, "import", d("big"), "--out", d("big_run"), expect=2)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="h2_hf_reference_") as work:
        os.chdir(work)
        for tied in (True, False):
            run_case(binary, root, work, tied)
    if FAILURES:
        sys.exit(f"hf_reference: {len(FAILURES)} check(s) failed")
    print("hf_reference: all checks passed")


if __name__ == "__main__":
    main()
