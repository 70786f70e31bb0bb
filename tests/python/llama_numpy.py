"""An independent NumPy (float64) reading of Hugging Face LlamaForCausalLM folders, for checking
what `h2 export` writes and what `h2 logits` computes: a safetensors reader and writer (the header
parsed with json, the data with numpy.frombuffer), the folder loader (one file or an index), and
the Llama forward pass written from the transformers definition (RMSNorm, rotate_half rotary
embedding, grouped-query causal attention, SwiGLU MLP, tied or untied head). NumPy only."""

import json
import os
import struct

import numpy as np

_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8")}


def read_safetensors(path):
    """{name: float64 array} from a safetensors file (F32, F16, BF16, F64)."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    body = memoryview(data)[8 + length :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        raw = body[begin:end]
        if entry["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32)
        else:
            values = np.frombuffer(raw, dtype=_DTYPES[entry["dtype"]])
        tensors[name] = values.reshape(shape).astype(np.float64)
    return tensors


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: array} as F32 tensors, with an optional __metadata__ (as transformers does)."""
    header, chunks, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def load_hf_folder(folder):
    """(config dict, {name: float64 array}) of a Hugging Face model folder."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for name in files:
        weights.update(read_safetensors(os.path.join(folder, name)))
    return config, weights


def _rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def _rotate(x, cos, sin, layout):
    """x: (T, heads, D). layout "half": transformers' rotate_half (pairs i, i + D/2);
    "interleaved": the original Meta layout (pairs 2i, 2i + 1), for showing the test can tell."""
    if layout == "half":
        return x * cos[:, None, :] + _rotate_half(x) * sin[:, None, :]
    half = x.shape[-1] // 2
    c, s = cos[:, None, :half], sin[:, None, :half]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * c - odd * s
    out[..., 1::2] = odd * c + even * s
    return out


def llama3_inv_freq(inv_freq, rope):
    """Llama 3.1's frequency scaling (Meta's reference apply_scaling): high frequencies kept,
    low ones divided by `factor`, a linear blend between them in 1 / wavelength."""
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old_len = rope["original_max_position_embeddings"]
    wavelen = 2 * np.pi / inv_freq
    smooth = np.clip((old_len / wavelen - low) / (high - low), 0.0, 1.0)
    blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    return np.where(wavelen < old_len / high, inv_freq,
                    np.where(wavelen > old_len / low, inv_freq / factor, blended))


def forward(config, w, ids, rotary="half"):
    """Logits (T, V) in float64 for one sequence of token ids."""
    C = config["hidden_size"]
    H = config["num_attention_heads"]
    Hkv = config.get("num_key_value_heads", H)
    D = config.get("head_dim") or C // H
    eps = config["rms_norm_eps"]
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    theta = config.get("rope_theta", rope.get("rope_theta", 10000.0))
    T = len(ids)

    inv_freq = theta ** (-np.arange(0, D, 2, dtype=np.float64) / D)
    if rope.get("rope_type", "default") == "llama3":
        inv_freq = llama3_inv_freq(inv_freq, rope)
    angles = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos = np.cos(np.concatenate([angles, angles], axis=-1))
    sin = np.sin(np.concatenate([angles, angles], axis=-1))
    mask = np.triu(np.ones((T, T), dtype=bool), k=1)

    x = w["model.embed_tokens.weight"][np.asarray(ids)]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = _rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, D)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, Hkv, D)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, Hkv, D)
        q, k = _rotate(q, cos, sin, rotary), _rotate(k, cos, sin, rotary)
        k = np.repeat(k, H // Hkv, axis=1)  # query head h reads key/value head h // (H / Hkv)
        v = np.repeat(v, H // Hkv, axis=1)
        scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(D)
        scores[:, mask] = -np.inf
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        attn = np.einsum("hts,shd->thd", probs, v).reshape(T, H * D)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        h = _rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    x = _rms_norm(x, w["model.norm.weight"], eps)
    tied = config.get("tie_word_embeddings", False)
    return x @ w["model.embed_tokens.weight" if tied else "lm_head.weight"].T
