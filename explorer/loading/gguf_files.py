"""Read a GGUF file (llama.cpp's format) into our names: Llama (and Mistral), Qwen2, Qwen3,
Gemma 3 and Phi-3 architectures.

GGUF stores quantised weights (Q4_0, Q4_1, Q5_0, Q8_0, the K-quants, F16, BF16, ...); the
``gguf`` package turns them back into float32. Three things differ from a Hugging Face folder:
- llama.cpp reorders the rows of a Llama model's query and key projections for its interleaved
  rotary layout; ``unpermute_rotary`` undoes that (the other architectures are stored as they are);
- a Gemma file's norms already hold (1 + weight), which is what our RMSNorm multiplies by;
- what llama.cpp fixes in code rather than in the file (Gemma 3's every-sixth-layer-global
  pattern and local rotary base) is taken as llama.cpp takes it.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from explorer.model import ModelConfig

from .errors import ModelLoadError

ARCHITECTURES = ("llama", "qwen2", "qwen3", "gemma3", "phi3")
GEMMA3_GLOBAL_EVERY = 6  # llama.cpp: layers 5, 11, 17, ... of Gemma 3 read everything; the rest a window
GEMMA3_LOCAL_ROPE_BASE = 10_000.0

GGUF_LAYER_NAMES = {
    "attn_norm": "self_attn_norm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",  # Qwen3, Gemma 3
    "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "self_attn_norm_after",  # Gemma 3's sandwich
    "ffn_norm": "ffn_norm",
    "post_ffw_norm": "ffn_norm_after",
    "ffn_gate": "ffn.gate_proj",
    "ffn_up": "ffn.up_proj",
    "ffn_down": "ffn.down_proj",
}


def unpermute_rotary(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head row order: (out, in) rows back to the Hugging Face order.

    llama.cpp writes each head's rows as pairs (x[0], x[half], x[1], x[half+1], ...);
    Hugging Face keeps the two halves apart (x[0..half), x[half..)).
    """
    rows = w.shape[0]
    per_head = rows // n_heads
    return w.reshape(n_heads, per_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def gguf_config(reader, name: str) -> ModelConfig:
    """The ModelConfig of a GGUF file, from its ``{architecture}.*`` metadata."""
    arch = _field(reader, "general.architecture")
    if arch not in ARCHITECTURES:
        raise ModelLoadError(
            f"{name} holds a {arch!r} model; the explorer reads GGUF files of the {', '.join(ARCHITECTURES)} "
            "architectures"
        )

    def meta(key: str, default=None):
        return _field(reader, f"{arch}.{key}", default)

    n_heads = int(meta("attention.head_count"))
    d_model = int(meta("embedding_length"))
    head_dim = int(meta("attention.key_length", d_model // n_heads))
    tensors = {t.name for t in reader.tensors}
    window = meta("attention.sliding_window")
    config = ModelConfig(
        family={"gemma3": "gemma3_text"}.get(arch, arch),
        vocab_size=len(_field(reader, "tokenizer.ggml.tokens")),
        d_model=d_model,
        n_layers=int(meta("block_count")),
        n_heads=n_heads,
        n_kv_heads=int(meta("attention.head_count_kv", n_heads)),
        head_dim=head_dim,
        d_ff=int(meta("feed_forward_length")),
        max_positions=int(meta("context_length")),
        norm="rms",
        norm_eps=float(meta("attention.layer_norm_rms_epsilon")),
        positions="rope",
        rope_theta=float(meta("rope.freq_base", 10000.0)),
        rotary_dim=int(meta("rope.dimension_count", head_dim)),
        activation="gelu_tanh" if arch == "gemma3" else "silu",
        gated_ffn=True,
        qkv_bias="blk.0.attn_q.bias" in tensors,
        qk_norm="blk.0.attn_q_norm.weight" in tensors,
        out_bias=False,
        ffn_bias=False,
        tie_embeddings="output.weight" not in tensors,
        sliding_window=int(window) if window else None,
        bos_token_id=_field(reader, "tokenizer.ggml.bos_token_id"),
        eos_token_id=_field(reader, "tokenizer.ggml.eos_token_id"),
        pad_token_id=_field(reader, "tokenizer.ggml.padding_token_id"),
        extra={"source": name, "gguf_name": _field(reader, "general.name"), "gguf_architecture": arch},
    )
    return as_llama_cpp_runs_gemma3(config) if arch == "gemma3" else config


def as_llama_cpp_runs_gemma3(config: ModelConfig) -> ModelConfig:
    """What llama.cpp fixes in code for Gemma 3 rather than in the file: every sixth layer global
    (the others a sliding window), the local layers' rotary base, the norms around each sublayer,
    √d on the embeddings, and 1/√head_dim on the scores."""
    every = GEMMA3_GLOBAL_EVERY
    types = ["full" if (i + 1) % every == 0 else "sliding" for i in range(config.n_layers)]
    return dataclasses.replace(
        config, layer_types=types if config.sliding_window else None, rope_local_theta=GEMMA3_LOCAL_ROPE_BASE,
        sandwich_norm=True, scale_embeddings=True, attn_scale=config.head_dim**-0.5,
    )  # fmt: skip


def gguf_state(reader, config: ModelConfig, progress: bool) -> dict[str, torch.Tensor]:
    """Every tensor dequantised to float32, in our names."""
    import gguf  # imported here: only this loader needs it

    arch = config.extra["gguf_architecture"]
    state: dict[str, torch.Tensor] = {}
    for tensor in tqdm(
        reader.tensors, desc=f"Converting {config.extra['source']}", unit="tensor", disable=not progress
    ):
        w = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)  # (out, in)
        state.update(_renamed(tensor.name, w, config, arch))
    return state


GGUF_TOP_NAMES = {
    "token_embd.weight": "embed_tokens.weight",
    "output_norm.weight": "decoder.final_norm.weight",
    "output.weight": "lm_head.weight",
}


def _renamed(name: str, w: np.ndarray, config: ModelConfig, arch: str) -> dict[str, torch.Tensor]:
    """One GGUF tensor under our name(s): Phi-3's fused ones split, a Llama's q/k rows reordered."""
    if name in GGUF_TOP_NAMES:
        return {GGUF_TOP_NAMES[name]: torch.from_numpy(w)}
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.(weight|bias)", name)
    if m is None:
        hint = " (rotary scaling, not supported yet)" if "rope" in name else ""
        raise ModelLoadError(f"unexpected GGUF tensor {name!r}{hint}")
    layer, kind, part = f"decoder.layers.{m[1]}", m[2], m[3]
    if kind == "attn_qkv":  # Phi-3: the query rows, then the key rows, then the value rows
        q_rows, kv_rows = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
        q, k, v = np.split(w, [q_rows, q_rows + kv_rows])
        return {f"{layer}.self_attn.{p}_proj.{part}": torch.from_numpy(np.ascontiguousarray(x))
                for p, x in zip("qkv", (q, k, v), strict=True)}  # fmt: skip
    if kind == "ffn_up" and arch == "phi3":  # Phi-3: gate rows, then up rows
        gate, up = np.split(w, 2)
        return {f"{layer}.ffn.gate_proj.{part}": torch.from_numpy(np.ascontiguousarray(gate)),
                f"{layer}.ffn.up_proj.{part}": torch.from_numpy(np.ascontiguousarray(up))}  # fmt: skip
    if kind not in GGUF_LAYER_NAMES:
        raise ModelLoadError(f"unexpected GGUF tensor {name!r}")
    if arch == "llama" and kind in ("attn_q", "attn_k"):
        w = unpermute_rotary(w, config.n_heads if kind == "attn_q" else config.n_kv_heads)
    return {f"{layer}.{GGUF_LAYER_NAMES[kind]}.{part}": torch.from_numpy(np.ascontiguousarray(w))}


def read_gguf(path: Path, progress: bool = True) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError, KeyError) as error:
        raise ModelLoadError(f"{path.name} is not a readable GGUF file ({type(error).__name__})") from error
    config = gguf_config(reader, path.name)
    return config, gguf_state(reader, config, progress)
