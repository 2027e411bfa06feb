"""OPT: GPT-2's design with ReLU, separate q/k/v and a position table offset by two rows."""

from __future__ import annotations

import re

import torch

from explorer.loading.errors import ModelLoadError
from explorer.model import ModelConfig

from .common import POSITION_OFFSET, activation
from .marian import LAYER_NAMES as MARIAN_LAYER_NAMES


def read_config(hf: dict) -> ModelConfig:
    """OPT: GPT-2's design (learned positions, LayerNorm, biases everywhere) with ReLU, separate
    q/k/v matrices and a position table offset by two rows."""
    d = hf["hidden_size"]
    if hf.get("word_embed_proj_dim", d) != d:
        raise ModelLoadError(
            f"this opt model projects its {hf['word_embed_proj_dim']}-wide embeddings in and out "
            "(word_embed_proj_dim), not supported yet"
        )
    if not hf.get("layer_norm_elementwise_affine", True):
        raise ModelLoadError(
            "this opt model's norms have no weights (layer_norm_elementwise_affine), not supported yet"
        )
    pre_norm, bias = hf.get("do_layer_norm_before", True), hf.get("enable_bias", True)
    return ModelConfig(
        family="opt", vocab_size=hf["vocab_size"], d_model=d, n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"], d_ff=hf["ffn_dim"], max_positions=hf["max_position_embeddings"],
        norm="layer", norm_eps=1e-5, norm_first=pre_norm,
        final_norm=pre_norm and not hf.get("_remove_final_layer_norm", False), positions="learned",
        activation=activation(hf.get("activation_function", "relu")), qkv_bias=bias, out_bias=bias, ffn_bias=bias,
        tie_embeddings=hf.get("tie_word_embeddings", True), bos_token_id=hf.get("bos_token_id"),
        eos_token_id=hf.get("eos_token_id"), pad_token_id=hf.get("pad_token_id"),
    )  # fmt: skip


def rename_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Its layers are named as Marian's; the position table loses its first two rows."""
    out: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        name = name.removeprefix("model.")
        if name == "decoder.embed_tokens.weight":
            out["embed_tokens.weight"] = w
        elif name == "decoder.embed_positions.weight":
            out["decoder.embed.positions.weight"] = w[POSITION_OFFSET:]
        elif name.startswith("decoder.final_layer_norm."):
            out["decoder.final_norm." + name.rsplit(".", 1)[1]] = w
        elif name == "lm_head.weight":
            out["lm_head.weight"] = w  # dropped when tied (families/__init__.py)
        elif (m := re.fullmatch(r"decoder\.layers\.(\d+)\.(.+)\.(weight|bias)", name)) and m[2] in MARIAN_LAYER_NAMES:
            out[f"decoder.layers.{m[1]}.{MARIAN_LAYER_NAMES[m[2]]}.{m[3]}"] = w
        else:
            raise ModelLoadError(f"unexpected OPT weight {name!r}")
    return out
