#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/ (fuzz/README.md).

Text seeds are copies of configs/ or small variants of them; binary seeds (safetensors, token
files, store frames) are built here byte by byte, the way the C++ writers lay them out. Every seed
is small (< 8 KiB) and named for what it exercises; a few are invalid on purpose (prefix bad-).
Re-running rewrites the files it owns and leaves other seeds (e.g. a fixed finding's reproducer)
alone.

Usage: fuzz/make_seeds.py
"""
import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def seed(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    assert len(data) < 8192, f"{target}/{name}: {len(data)} bytes"
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def config_file(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def train_config():
    for name in ("tiny", "hetero-4", "mixed-8", "numerics-256", "llama-7b"):
        seed("train_config", f"{name}.yaml", config_file(f"configs/train/{name}.yaml"))
    # YAML, then NUL-separated --set overrides, as `h2 train CONFIG --set K=V ...` passes them.
    seed("train_config", "overrides.yaml",
         "model: {dim: 64, n_heads: 4}\ndata: {path: x.bin, format: bin}\n\0train.lr=3e-4\0"
         "parallel.mode=pipeline\0parallel.stage_layers=3,1\0parallel.stage_ranks=1,1")
    seed("train_config", "precision.yaml",
         "train: {dtype: bf16}\nprecision:\n  recipe: fp8_delayed\n  modules:\n"
         "    layers.*.mlp: nvfp4\n  keep_first: 1\n  target_after: 0.5\n"
         "  target_recipe: bf16\ndata: {path: [a.bin, 'b_*.bin'], val_path: v.bin}\n")
    seed("train_config", "pipeline-fsdp.yaml",
         "parallel: {mode: pipeline, schedule: interleaved-1f1b, chunks: 2, fsdp: true,\n"
         "  gather_group: 2, wire_dtype: f8e4m3, replicas: 2}\ntrain: {grad_accum: 4}\n"
         "cluster: {devices: 'vchip:chip-a,vchip:chip-b,cpu,cuda:0'}\n")
    seed("train_config", "bad-twice.yaml", "model:\n  dim: 64\n  dim: 128\n")
    seed("train_config", "bad-type.yaml", "train:\n  lr: [1, 2]\n  steps: 1.5\n")


def plan_file():
    for name in ("hetero-4", "torchtitan-13b-a100-64"):
        seed("plan_file", f"{name}.yaml", config_file(f"configs/plans/{name}.yaml"))
    seed("plan_file", "settings.yaml",  # the example of train/config/plan.h
         "replicas: 1\nmicro_batch_rows: 4\nmicro_batches: 4\nschedule: 1f1b\nfsdp: true\n"
         "predicted: {step_ms: 81.2, tokens_per_s: 25200, peak_mib: [60.1, 31.7], "
         "busy_ms: [70, 66]}\nstages:\n  - {layers: 0-2, chip: vchip:chip-a, ranks: [0, 1]}\n"
         "  - {layers: 3-3, chip: vchip:chip-b, ranks: [2, 3]}\n")
    seed("plan_file", "interleaved.yaml",
         "schedule: interleaved-1f1b\nchunks: 2\nmicro_batches: 4\nlead: 0\nwire_dtype: bf16\n"
         "stages:\n  - {layers: [0, 0], chip: cpu, ranks: [0]}\n"
         "  - {layers: 1, chip: cpu, ranks: [1]}\n  - {layers: 2-2, chip: cpu, ranks: [0]}\n"
         "  - {layers: 3-3, chip: cpu, ranks: [1]}\n")
    seed("plan_file", "replicas.yaml",
         "replicas: 2\nschedule: zb-h1\ngather_group: 1\nrecompute: true\nstages:\n"
         "  - {layers: 0-1, chip: vchip:0, ranks: [0]}\n  - {layers: 2-3, chip: vchip:1, ranks: [1]}\n")
    seed("plan_file", "bad-gap.yaml",
         "stages:\n  - {layers: 0-1, chip: cpu, ranks: [0]}\n  - {layers: 3-3, chip: cpu, ranks: [1]}\n")


def chip_spec():
    seed("chip_spec", "default.yaml", config_file("configs/chips/default.yaml"))
    seed("chip_spec", "one.yaml",
         "chips:\n  - name: npu-x\n    count: 8\n    memory: 64GB\n    memory_bandwidth: 1.6e12\n"
         "    peak_flops: {f32: 6e13, bf16: 3e14}\n    dtypes: [f32, bf16, i64]\n"
         "    time_scale: 0.5\n    device_direct: true\n")
    seed("chip_spec", "bad-key.yaml",
         "chips:\n  - {name: c, memory: 1KiB, memory_bandwidth: 1, peak_flops: {f32: 1},\n"
         "     dtypes: [f32], colour: red}\n")


def cluster_file():
    for name in ("mixed-4", "uniform-4", "a100-64", "mixed-8"):
        seed("cluster_file", f"{name}.yaml", config_file(f"configs/clusters/{name}.yaml"))
    seed("cluster_file", "cross-per-type.yaml",  # the per-type cross_type of cluster_file.h
         "name: two-vendors\nchips:\n  - {name: chip-a, memory: 2GiB, memory_bandwidth: 10e9,\n"
         "     peak_flops: {f32: 40e9}, dtypes: [f32]}\n  - {name: chip-b, memory: 4GiB,\n"
         "     memory_bandwidth: 20e9, peak_flops: {f32: 20e9}, dtypes: [f32]}\nnodes:\n"
         "  - {chip: chip-a, count: 2, repeat: 2}\n  - {chip: chip-b, count: 1}\nlinks:\n"
         "  intra_node: {chip-a: {bandwidth: 5e9, latency: 5e-6}}\n"
         "  inter_node: {chip-a: {bandwidth: 2e9, latency: 2e-5}}\n"
         "  cross_type: {chip-a: {bandwidth: 1e9}, chip-b: {bandwidth: 2e8, latency: 1e-4}}\n")
    seed("cluster_file", "bad-no-cross.yaml",
         "chips:\n  - {name: a, memory: 1GiB, memory_bandwidth: 1e9, peak_flops: {f32: 1e9},"
         " dtypes: [f32]}\n  - {name: b, memory: 1GiB, memory_bandwidth: 1e9,"
         " peak_flops: {f32: 1e9}, dtypes: [f32]}\nnodes: [{chip: a, count: 1}, {chip: b, count: 1}]\n")


def safetensors_bytes(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, bytes)] in file order, as write_safetensors lays them out."""
    header, offset, body = {}, 0, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        body += data
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + body


def safetensors():
    f32 = struct.pack("<6f", 1, -2, 0.5, 3, 0, 1e-3)
    seed("safetensors", "one-f32.safetensors", safetensors_bytes([("w", "F32", [2, 3], f32)]))
    seed("safetensors", "dtypes.safetensors", safetensors_bytes(
        [("a", "BF16", [2], b"\x80\x3f\x00\x40"), ("b", "F16", [1], b"\x00\x3c"),
         ("c", "I32", [1], struct.pack("<i", -7)), ("d", "I64", [1], struct.pack("<q", 1 << 40)),
         ("e", "U8", [3], b"\x01\x02\x03"), ("f", "F8_E4M3", [2], b"\x38\x40"),
         ("g", "F8_E5M2", [1, 1], b"\x3c")], metadata={"format": "pt"}))
    seed("safetensors", "scalar-and-empty.safetensors",
         safetensors_bytes([("s", "F32", [], struct.pack("<f", 2)), ("z", "F32", [0, 4], b"")]))
    seed("safetensors", "unpadded.safetensors",
         safetensors_bytes([("x", "I64", [1], struct.pack("<q", 5))], pad=False))
    seed("safetensors", "bad-length.safetensors", struct.pack("<Q", 1 << 40) + b"{}")
    seed("safetensors", "bad-offsets.safetensors",
         safetensors_bytes([("w", "F32", [2, 3], f32[:8])]))


# The tiny Llama of fuzz/hf_model_fuzzer.cpp: vocab 4, dim 4, 2 heads, 1 key/value head, ffn 4,
# 1 layer, untied head; its first 5 tensors are in shard 1, the rest in shard 2.
HF_TENSORS = ["model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
              "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
              "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
              "model.layers.0.post_attention_layernorm.weight", "model.layers.0.mlp.gate_proj.weight",
              "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight",
              "model.norm.weight", "lm_head.weight"]


def hf_config(**changes):
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 4,
              "hidden_size": 4, "intermediate_size": 4, "num_hidden_layers": 1,
              "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 2,
              "max_position_embeddings": 8,
              "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
              "rope_theta": 10000.0, "rope_scaling": None, "rms_norm_eps": 1e-05,
              "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False,
              "mlp_bias": False, "bos_token_id": None, "eos_token_id": None,
              "pad_token_id": None, "dtype": "float32"}
    config.update(changes)
    return json.dumps(config, indent=2)


def hf_index(assign=None):
    weight_map = {}
    for i, name in enumerate(HF_TENSORS):
        shard = 1 if i < 5 else 2
        weight_map[name] = f"model-0000{shard}-of-00002.safetensors"
    weight_map.update(assign or {})
    return json.dumps({"metadata": {"total_size": 448}, "weight_map": weight_map}, indent=2)


def hf_model():
    seed("hf_model", "index.json", hf_index())
    seed("hf_model", "config-and-index.json", hf_config() + "\0" + hf_index())
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    seed("hf_model", "llama3-rope.json",
         hf_config(rope_scaling=llama3, rope_parameters=None, eos_token_id=[3, 2],
                   bos_token_id=1, torch_dtype="bfloat16") + "\0" + hf_index())
    seed("hf_model", "single-file.json", hf_config() + "\0")
    seed("hf_model", "bad-wrong-shard.json",
         hf_index({"model.norm.weight": "model-00001-of-00002.safetensors"}))
    seed("hf_model", "bad-tied.json", hf_config(tie_word_embeddings=True) + "\0" + hf_index())


def manifest_json(files, model, optimizer, step=100, world_size=2):
    def section(tensors):
        return {name: {"dtype": dtype, "shape": shape,
                       "pieces": [{"file": f, "key": k, "rows": rows} for f, k, rows in pieces]}
                for name, dtype, shape, pieces in tensors}
    doc = {"format": "h2-checkpoint", "version": 1, "step": step, "world_size": world_size,
           "files": {name: {"bytes": size, "xxh3_64": checksum} for name, size, checksum in files},
           "model": section(model), "optimizer": section(optimizer)}
    return json.dumps(doc, indent=1) + "\n"


def manifest():
    files = [("rank-00000.safetensors", 1024, "9c1f0a3b5d7e2f40"),
             ("rank-00001.safetensors", 1040, "00000000deadbeef")]
    model = [("model.embed_tokens.weight", "f32", [256, 8],
              [("rank-00000.safetensors", "model.embed_tokens.weight", [0, 128]),
               ("rank-00001.safetensors", "model.embed_tokens.weight", [128, 256])]),
             ("model.norm.weight", "f32", [8],
              [("rank-00000.safetensors", "model.norm.weight", [0, 8])])]
    optimizer = [("step", "i64", [], [("rank-00000.safetensors", "step", [0, 1])]),
                 ("exp_avg.model.norm.weight", "bf16", [8],
                  [("rank-00000.safetensors", "m.0", [0, 4]),
                   ("rank-00001.safetensors", "m.1", [4, 8])])]
    seed("manifest", "two-ranks.json", manifest_json(files, model, optimizer))
    seed("manifest", "empty.json", manifest_json([], [], [], step=0, world_size=1))
    seed("manifest", "bad-gap.json", manifest_json(files[:1], [
        ("w", "f32", [4, 2], [("rank-00000.safetensors", "w", [0, 2]),
                              ("rank-00000.safetensors", "w", [3, 4])])], []))


def token_file():
    def header(magic, version, count):
        return struct.pack("<256i", magic, version, count, *([0] * 253))
    tokens = [50256, 15496, 11, 995, 0, 65535, 7, 7]
    seed("token_file", "gpt2-v1.bin",
         header(20240520, 1, len(tokens)) + struct.pack(f"<{len(tokens)}H", *tokens))
    seed("token_file", "llama3-v7.bin",
         header(20240801, 7, 4) + struct.pack("<4I", 128000, 9906, 128001, 0x7FFFFFFF))
    seed("token_file", "nanogpt-uint16.bin", struct.pack("<6H", 1, 2, 3, 50000, 0, 65535))
    seed("token_file", "empty-v1.bin", header(20240520, 1, 0))
    seed("token_file", "bad-count.bin", header(20240520, 1, 5) + struct.pack("<3H", 1, 2, 3))
    seed("token_file", "bad-u32-token.bin", header(20240801, 7, 1) + struct.pack("<I", 0x80000000))


def frame(op, *parts):
    body = bytes([op])
    for kind, value in parts:
        if kind == "s":
            value = value.encode() if isinstance(value, str) else value
            body += struct.pack("<I", len(value)) + value
        elif kind == "u32":
            body += struct.pack("<I", value)
        else:
            body += struct.pack("<q", value)
    return struct.pack("<I", len(body)) + body


def store_protocol():
    hello = frame(1, ("s", "0123456789abcdef"))
    seed("store_protocol", "session.bin", hello + frame(2, ("s", "rank/0"), ("s", "10.0.0.1:4000"))
         + frame(3, ("s", "rank/1")) + frame(4, ("s", "barrier"), ("i64", 1))
         + frame(5, ("u32", 2), ("s", "rank/0"), ("s", "rank/1"))
         + frame(6, ("s", "epoch"), ("s", ""), ("s", "1")))
    seed("store_protocol", "replies.bin", frame(64) + frame(65, ("s", "wrong job token"))
         + frame(66, ("s", b"\x00\xff")) + frame(67, ("i64", -5)) + frame(68, ("s", "no")))
    seed("store_protocol", "partial.bin", hello + frame(2, ("s", "k"), ("s", "v"))[:7])
    seed("store_protocol", "bad-leftover.bin", struct.pack("<I", 3) + b"\x03\x00\x00")


def profile_json(rows):
    def cost(scale):
        return {"forward_s": 1e-3 * scale, "backward_s": 2e-3 * scale, "input_s": 1e-3 * scale,
                "weight_s": 1e-3 * scale, "optimizer_s": 1e-4, "stash_bytes": 4096 * scale,
                "forward_workspace_bytes": 1024, "workspace_bytes": 2048 * scale,
                "deferred_bytes": 512 * scale}
    doc = {"format": "h2-profile", "format_version": 2, "chip": "chip-a",
           "chip_spec": "memory_bandwidth=1e+10 link_bandwidth=5e+09 peak_flops=f32=4e+10 "
                        "time_scale=1",
           "model": {"vocab_size": 256, "dim": 128, "n_layers": 4, "n_heads": 4, "n_kv_heads": 4,
                     "ffn_dim": 344, "seq_len": 128, "tie_embeddings": True},
           "dtype": "f32", "h2_version": "0.1.0", "overrun_share": 0.01, "origin": "measured",
           "rows": {str(r): {"embedding": cost(r), "block": cost(2 * r), "head": cost(3 * r)}
                    for r in rows}}
    return json.dumps(doc, indent=2) + "\n"


def profile():
    seed("profile", "three-sizes.json", profile_json([1, 2, 4]))
    seed("profile", "one-size.json", profile_json([8]))
    seed("profile", "no-sizes.json", profile_json([]))
    seed("profile", "bad-version.json", profile_json([1]).replace('"format_version": 2',
                                                                  '"format_version": 1'))


if __name__ == "__main__":
    for make in (train_config, plan_file, chip_spec, cluster_file, safetensors, hf_model,
                 manifest, token_file, store_protocol, profile):
        make()
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(CORPUS) for f in fs)
    print(f"make_seeds: {total} bytes of seeds in fuzz/corpus")
