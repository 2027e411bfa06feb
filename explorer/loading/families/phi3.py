"""Phi-3 and Phi-4-mini: Llama with fused query/key/value and gate/up matrices, and partial rotary."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from explorer.model import ModelConfig

from . import llama
from .common import GgufArchitecture, with_hf_window


def read_config(hf: dict) -> ModelConfig:
    """Phi-3 (and Phi-4-mini): Llama's design, its query/key/value and gate/up projections each
    stored as one matrix; rotary on all of each head, or on its first part (partial_rotary_factor)."""
    rope = hf.get("rope_parameters") or {}
    partial = rope.get("partial_rotary_factor", hf.get("partial_rotary_factor")) or 1.0
    config = llama.read_config(hf)
    config = dataclasses.replace(config, family="phi3", rotary_dim=int(config.head_dim * partial))
    return with_hf_window(config, hf.get("sliding_window"))


def rename_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """The fused matrices split into Llama's names: qkv_proj (q rows, then k, then v) and
    gate_up_proj (gate rows, then up)."""
    q_rows, kv_rows = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    split = {}
    for name, w in hf_state.items():
        if name.endswith("self_attn.qkv_proj.weight"):
            base = name.removesuffix("qkv_proj.weight")
            q, k, v = w.split([q_rows, kv_rows, kv_rows])
            split |= {f"{base}q_proj.weight": q, f"{base}k_proj.weight": k, f"{base}v_proj.weight": v}
        elif name.endswith("mlp.gate_up_proj.weight"):
            base = name.removesuffix("gate_up_proj.weight")
            gate, up = w.split([config.d_ff, config.d_ff])
            split |= {f"{base}gate_proj.weight": gate, f"{base}up_proj.weight": up}
        else:
            split[name] = w
    return llama.rename_weights(split, config)


def gguf_tensor(kind: str, w: np.ndarray, config: ModelConfig) -> dict[str, np.ndarray] | None:
    """Phi-3's fused matrices, split as ``rename_weights`` splits them."""
    if kind == "attn_qkv":  # the query rows, then the key rows, then the value rows
        q_rows, kv_rows = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
        q, k, v = np.split(w, [q_rows, q_rows + kv_rows])
        return {"self_attn.q_proj": q, "self_attn.k_proj": k, "self_attn.v_proj": v}
    if kind == "ffn_up":  # gate rows, then up rows
        gate, up = np.split(w, 2)
        return {"ffn.gate_proj": gate, "ffn.up_proj": up}
    return None


GGUF = GgufArchitecture("phi3", family="phi3", tensor=gguf_tensor)
