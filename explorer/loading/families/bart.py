"""BART and mBART: Marian's layout with learned positions and embedding norms."""

from __future__ import annotations

import dataclasses
import re

import torch

from explorer.model import ModelConfig

from . import marian
from .common import POSITION_OFFSET


def read_config(hf: dict) -> ModelConfig:
    """BART: Marian's layout with learned positions (offset by two rows, as OPT's), a LayerNorm on
    the embeddings of each stack, GELU; post-norm. mBART: the same, pre-norm with a final norm
    in each stack, and embeddings scaled by sqrt(d_model)."""
    pre_norm = hf.get("model_type") == "mbart"
    defaults = {"activation_function": "gelu", "scale_embedding": False}
    config = marian.read_config({**defaults, **hf, "normalize_before": pre_norm})
    return dataclasses.replace(
        config, family=hf["model_type"], positions="learned", embedding_norm=True, final_norm=pre_norm,
        bos_token_id=hf.get("bos_token_id"), decoder_start_token_id=hf.get("decoder_start_token_id", 2),
    )  # fmt: skip


def rename_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Marian's names, plus each stack's position table (its first two rows dropped), its
    embedding norm and (mBART) its final norm."""
    out: dict[str, torch.Tensor] = {}
    layers: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        if m := re.fullmatch(r"model\.(encoder|decoder)\.embed_positions\.weight", name):
            out[f"{m[1]}.embed.positions.weight"] = w[POSITION_OFFSET:]
        elif m := re.fullmatch(r"model\.(encoder|decoder)\.layernorm_embedding\.(weight|bias)", name):
            out[f"{m[1]}.embed.norm.{m[2]}"] = w
        elif m := re.fullmatch(r"model\.(encoder|decoder)\.layer_norm\.(weight|bias)", name):
            out[f"{m[1]}.final_norm.{m[2]}"] = w
        else:
            layers[name] = w
    return marian.rename_weights(layers, config) | out
