"""Llama (and the base of its relatives): RMSNorm, rotary positions, SwiGLU, grouped-query attention.
nn.Linear (out, in) weights, stored as ours but for their names.
"""

from __future__ import annotations

import re

import numpy as np
import torch

from explorer.loading.errors import ModelLoadError
from explorer.model import ModelConfig

from .common import GgufArchitecture, activation, first


def read_config(hf: dict) -> ModelConfig:
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in ("default", None):
        raise ModelLoadError(f"RoPE scaling {rope_type!r} is not supported; only plain RoPE is")
    theta = rope.get("rope_theta", hf.get("rope_theta", 10000.0))
    return ModelConfig(
        family="llama",
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"],
        n_kv_heads=hf.get("num_key_value_heads") or hf["num_attention_heads"],
        head_dim=hf.get("head_dim"),
        d_ff=hf["intermediate_size"],
        max_positions=hf["max_position_embeddings"],
        norm="rms",
        norm_eps=hf.get("rms_norm_eps", 1e-6),
        positions="rope",
        rope_theta=float(theta),
        activation=activation(hf.get("hidden_act", "silu")),
        gated_ffn=True,
        qkv_bias=hf.get("attention_bias", False),
        out_bias=hf.get("attention_bias", False),
        ffn_bias=hf.get("mlp_bias", False),
        tie_embeddings=hf.get("tie_word_embeddings", False),
        bos_token_id=hf.get("bos_token_id"),
        eos_token_id=first(hf.get("eos_token_id")),
        pad_token_id=hf.get("pad_token_id"),
    )


LAYER_NAMES = {
    "input_layernorm": "self_attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "self_attn.q_proj",
    "self_attn.k_proj": "self_attn.k_proj",
    "self_attn.v_proj": "self_attn.v_proj",
    "self_attn.o_proj": "self_attn.o_proj",
    "self_attn.q_norm": "self_attn.q_norm",  # Qwen3
    "self_attn.k_norm": "self_attn.k_norm",
    "mlp.gate_proj": "ffn.gate_proj",
    "mlp.up_proj": "ffn.up_proj",
    "mlp.down_proj": "ffn.down_proj",
}


def rename_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        if name == "model.embed_tokens.weight":
            out["embed_tokens.weight"] = w
        elif name == "model.norm.weight":
            out["decoder.final_norm.weight"] = w
        elif name == "lm_head.weight":
            out["lm_head.weight"] = w  # dropped when tied (families/__init__.py)
        elif m := re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)", name):
            if m[2] not in LAYER_NAMES:
                raise ModelLoadError(f"unexpected Llama weight {name!r}")
            out[f"decoder.layers.{m[1]}.{LAYER_NAMES[m[2]]}.{m[3]}"] = w
        elif name.endswith("rotary_emb.inv_freq"):
            continue
        else:
            raise ModelLoadError(f"unexpected Llama weight {name!r}")
    return out


def unpermute_rotary(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head row order: (out, in) rows back to the Hugging Face order.

    llama.cpp writes each head's rows as pairs (x[0], x[half], x[1], x[half+1], ...), for its
    interleaved rotary layout; Hugging Face keeps the two halves apart (x[0..half), x[half..)).
    """
    per_head = w.shape[0] // n_heads
    return w.reshape(n_heads, per_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensor(kind: str, w: np.ndarray, config: ModelConfig) -> dict[str, np.ndarray] | None:
    """A Llama file's query and key rows are reordered (the other architectures store them as they are)."""
    if kind == "attn_q":
        return {"self_attn.q_proj": unpermute_rotary(w, config.n_heads)}
    if kind == "attn_k":
        return {"self_attn.k_proj": unpermute_rotary(w, config.n_kv_heads)}
    return None


GGUF = GgufArchitecture("llama", family="llama", tensor=gguf_tensor)  # Mistral's files are "llama" too
