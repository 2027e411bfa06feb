"""GPT-NeoX and Pythia: parallel attention and feed-forward, partial rotary, LayerNorm, GELU."""

from __future__ import annotations

import re

import torch

from explorer.loading.errors import ModelLoadError
from explorer.model import ModelConfig

from .common import activation, first


def read_config(hf: dict) -> ModelConfig:
    """GPT-NeoX and Pythia: attention and feed-forward side by side on the same input (parallel
    residual), rotary positions on part of each head, LayerNorm, GELU, biases."""
    rope = hf.get("rope_parameters") or {}
    if rope.get("rope_type", "default") not in ("default", None):
        raise ModelLoadError(f"RoPE scaling {rope['rope_type']!r} is not supported; only plain RoPE is")
    partial = rope.get("partial_rotary_factor", hf.get("rotary_pct")) or 1.0
    d, heads = hf["hidden_size"], hf["num_attention_heads"]
    bias = hf.get("attention_bias", True)
    return ModelConfig(
        family="gpt_neox", vocab_size=hf["vocab_size"], d_model=d, n_layers=hf["num_hidden_layers"], n_heads=heads,
        d_ff=hf["intermediate_size"], max_positions=hf["max_position_embeddings"], norm="layer",
        norm_eps=hf.get("layer_norm_eps", 1e-5), positions="rope",
        rope_theta=float(rope.get("rope_theta", hf.get("rotary_emb_base") or 10000.0)),
        rotary_dim=int(d // heads * partial), parallel_residual=hf.get("use_parallel_residual", True),
        activation=activation(hf.get("hidden_act", "gelu")), qkv_bias=bias, out_bias=bias,
        tie_embeddings=hf.get("tie_word_embeddings", False), bos_token_id=hf.get("bos_token_id"),
        eos_token_id=first(hf.get("eos_token_id")),
    )  # fmt: skip


LAYER_NAMES = {
    "input_layernorm": "self_attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "attention.dense": "self_attn.o_proj",
    "mlp.dense_h_to_4h": "ffn.up_proj",
    "mlp.dense_4h_to_h": "ffn.down_proj",
}


def rename_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """query_key_value holds, head by head, that head's query, key and value rows: split it."""
    out: dict[str, torch.Tensor] = {}
    heads, hd = config.n_heads, config.head_dim
    for name, w in hf_state.items():
        name = name.removeprefix("gpt_neox.")
        if name == "embed_in.weight":
            out["embed_tokens.weight"] = w
        elif name.startswith("final_layer_norm."):
            out["decoder.final_norm." + name.rsplit(".", 1)[1]] = w
        elif name in ("embed_out.weight", "lm_head.weight"):
            out["lm_head.weight"] = w  # dropped when tied (families/__init__.py)
        elif m := re.fullmatch(r"layers\.(\d+)\.(.+)\.(weight|bias)", name):
            layer, module, kind = f"decoder.layers.{m[1]}", m[2], m[3]
            if module == "attention.query_key_value":
                by_head = w.reshape(heads, 3, hd, *w.shape[1:])  # (heads, q/k/v, hd[, d_model])
                for i, proj in enumerate(("q_proj", "k_proj", "v_proj")):
                    out[f"{layer}.self_attn.{proj}.{kind}"] = by_head[:, i].reshape(heads * hd, *w.shape[1:])
            elif module in LAYER_NAMES:
                out[f"{layer}.{LAYER_NAMES[module]}.{kind}"] = w
            elif module not in ("attention.bias", "attention.masked_bias"):
                raise ModelLoadError(f"unexpected GPT-NeoX weight {name!r}")
        elif not name.endswith(("rotary_emb.inv_freq", "attention.bias", "attention.masked_bias")):
            raise ModelLoadError(f"unexpected GPT-NeoX weight {name!r}")
    return out
