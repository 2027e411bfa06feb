"""Tiny GGUF files written with the ``gguf`` library's own writer, as llama.cpp lays them out.

Random weights at a size the quantisations accept (K-quants pack 256 numbers to a block), our
byte-level BPE vocabulary as the file's tokenizer. Q8_0 weights are quantised from float by the
library; it cannot quantise to the K-quants, so a Q4_K file gets random well-formed blocks (two
small float16 scales, then random 6-bit scales and 4-bit numbers): the weights are whatever those
blocks mean, and every reader must read the same numbers from them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.builders import byte_bpe_tokenizer

D_MODEL, D_FF, CONTEXT = 256, 512, 256
LAYERS = {"gemma3": 6}  # Gemma 3's sixth layer is its first global one; the others have two
SHAPES = {  # architecture: (heads, key/value heads, head size)
    "llama": (4, 2, 64),
    "qwen2": (4, 2, 64),
    "qwen3": (4, 2, 128),  # head size not d_model / heads, as in Qwen3 (and transformers' default for it)
    "gemma3": (2, 1, 256),  # head size = query_pre_attn_scalar, as in Gemma 3 270M
    "phi3": (4, 4, 64),
}
Q4_K_BLOCK_BYTES = 144  # per 256 numbers: d, dmin (float16), 12 bytes of scales, 128 of 4-bit numbers


def tensors(arch: str, vocab: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Every tensor of a tiny ``arch`` model in llama.cpp's names: (out, in) matrices, 1-D norms."""
    heads, kv_heads, hd = SHAPES[arch]
    out = {"token_embd.weight": rng.normal(0, 0.5, (vocab, D_MODEL)), "output_norm.weight": norm(rng)}
    for i in range(LAYERS.get(arch, 2)):
        b = f"blk.{i}"
        out |= {f"{b}.attn_norm.weight": norm(rng), f"{b}.ffn_norm.weight": norm(rng)}
        out[f"{b}.attn_output.weight"] = rng.normal(0, 0.06, (D_MODEL, heads * hd))
        out[f"{b}.ffn_down.weight"] = rng.normal(0, 0.04, (D_MODEL, D_FF))
        if arch == "phi3":  # fused, as Phi-3 files store them
            out[f"{b}.attn_qkv.weight"] = rng.normal(0, 0.06, ((heads + 2 * kv_heads) * hd, D_MODEL))
            out[f"{b}.ffn_up.weight"] = rng.normal(0, 0.06, (2 * D_FF, D_MODEL))
            continue
        out[f"{b}.attn_q.weight"] = rng.normal(0, 0.06, (heads * hd, D_MODEL))
        out[f"{b}.attn_k.weight"] = rng.normal(0, 0.06, (kv_heads * hd, D_MODEL))
        out[f"{b}.attn_v.weight"] = rng.normal(0, 0.06, (kv_heads * hd, D_MODEL))
        out[f"{b}.ffn_gate.weight"] = rng.normal(0, 0.06, (D_FF, D_MODEL))
        out[f"{b}.ffn_up.weight"] = rng.normal(0, 0.06, (D_FF, D_MODEL))
        if arch == "qwen2":
            for p, rows in (("q", heads), ("k", kv_heads), ("v", kv_heads)):
                out[f"{b}.attn_{p}.bias"] = rng.normal(0, 0.3, rows * hd)
        if arch in ("qwen3", "gemma3"):
            out[f"{b}.attn_q_norm.weight"], out[f"{b}.attn_k_norm.weight"] = norm(rng, hd), norm(rng, hd)
        if arch == "gemma3":
            out[f"{b}.post_attention_norm.weight"], out[f"{b}.post_ffw_norm.weight"] = norm(rng), norm(rng)
    return {name: w.astype(np.float32) for name, w in out.items()}


def norm(rng: np.random.Generator, size: int = D_MODEL) -> np.ndarray:
    return 1 + rng.normal(0, 0.1, size)


def random_q4_k(rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """(rows, cols / 256 * 144) bytes of well-formed Q4_K blocks."""
    blocks = rng.integers(0, 256, (rows, cols // 256, Q4_K_BLOCK_BYTES), dtype=np.uint8)
    scales = np.array([2e-4, 1e-4], dtype=np.float16).view(np.uint8)  # d, dmin: weights about ±0.1
    blocks[:, :, :4] = scales
    return blocks.reshape(rows, -1)


def write_tiny_gguf(path: Path, arch: str, quant: str = "Q8_0", seed: int = 0) -> Path:
    """A tiny ``arch`` model in ``quant`` ("Q8_0", "Q4_K", "Q4_0", "Q4_1", "Q5_0", "F16", "BF16" or
    "F32") at ``path``."""
    import gguf

    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer = byte_bpe_tokenizer(path.parent / f"{path.stem}-tokenizer")
    rng = np.random.default_rng(seed)
    heads, kv_heads, hd = SHAPES[arch]
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"tiny-{arch}")
    writer.add_block_count(LAYERS.get(arch, 2))
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(D_MODEL)
    writer.add_feed_forward_length(D_FF)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(hd)
    writer.add_value_length(hd)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10_000.0)
    writer.add_rope_dimension_count(hd)
    if arch == "gemma3":
        writer.add_sliding_window(6)
    add_tokenizer(writer, tokenizer)
    for name, w in tensors(arch, len(tokenizer), rng).items():
        if w.ndim == 1 or quant == "F32":
            writer.add_tensor(name, w)
        elif quant == "Q4_K":  # gguf cannot quantize to Q4_K: random blocks, dequantized alike by both readers
            writer.add_tensor(name, random_q4_k(*w.shape, rng), raw_dtype=gguf.GGMLQuantizationType.Q4_K)
        else:  # Q8_0, Q4_0, Q4_1, Q5_0, F16, BF16: gguf's own quantizer
            kind = gguf.GGMLQuantizationType[quant]
            writer.add_tensor(name, gguf.quants.quantize(w, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def add_tokenizer(writer, tokenizer) -> None:
    """The byte-level BPE vocabulary and merges, as llama.cpp writes a GPT-2 style tokenizer."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    merges = json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    end = tokenizer.eos_token_id
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([token for token, _ in vocab])
    writer.add_token_types([3 if i == end else 1 for _, i in vocab])  # 3: a control token
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    writer.add_bos_token_id(end)
    writer.add_eos_token_id(end)
    writer.add_pad_token_id(end)
