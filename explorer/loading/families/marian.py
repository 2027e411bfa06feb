"""Marian (Opus-MT): the encoder-decoder translator. Post-norm, sinusoidal positions, one embedding
table shared by encoder, decoder and head.
"""

from __future__ import annotations

import re

import torch

from explorer.loading.errors import ModelLoadError
from explorer.model import ModelConfig

from .common import activation, first


def read_config(hf: dict) -> ModelConfig:
    if hf.get("encoder_attention_heads") != hf.get("decoder_attention_heads"):
        raise ModelLoadError("encoder and decoder with different head counts are not supported")
    if hf.get("encoder_ffn_dim") != hf.get("decoder_ffn_dim"):
        raise ModelLoadError("encoder and decoder with different feed-forward widths are not supported")
    if not hf.get("share_encoder_decoder_embeddings", True):
        raise ModelLoadError("Marian models with separate source and target vocabularies are not supported")
    return ModelConfig(
        family="marian",
        vocab_size=hf.get("decoder_vocab_size") or hf["vocab_size"],
        d_model=hf["d_model"],
        n_layers=hf["decoder_layers"],
        n_encoder_layers=hf["encoder_layers"],
        is_encoder_decoder=True,
        n_heads=hf["decoder_attention_heads"],
        d_ff=hf["decoder_ffn_dim"],
        max_positions=hf["max_position_embeddings"],
        norm="layer",
        norm_eps=1e-5,
        norm_first=bool(hf.get("normalize_before", False)),
        final_norm=False,
        positions="sinusoidal",
        activation=activation(hf.get("activation_function", "swish")),
        scale_embeddings=hf.get("scale_embedding", True),
        final_logits_bias=True,
        tie_embeddings=hf.get("tie_word_embeddings", True),
        bos_token_id=hf.get("bos_token_id"),
        eos_token_id=first(hf.get("eos_token_id")),
        pad_token_id=hf.get("pad_token_id"),
        decoder_start_token_id=hf.get("decoder_start_token_id", hf.get("pad_token_id")),
    )


LAYER_NAMES = {
    "self_attn.q_proj": "self_attn.q_proj",
    "self_attn.k_proj": "self_attn.k_proj",
    "self_attn.v_proj": "self_attn.v_proj",
    "self_attn.out_proj": "self_attn.o_proj",
    "self_attn_layer_norm": "self_attn_norm",
    "encoder_attn.q_proj": "cross_attn.q_proj",
    "encoder_attn.k_proj": "cross_attn.k_proj",
    "encoder_attn.v_proj": "cross_attn.v_proj",
    "encoder_attn.out_proj": "cross_attn.o_proj",
    "encoder_attn_layer_norm": "cross_attn_norm",
    "fc1": "ffn.up_proj",
    "fc2": "ffn.down_proj",
    "final_layer_norm": "ffn_norm",
}


EMBEDDING_NAMES = (
    "model.shared.weight",
    "model.encoder.embed_tokens.weight",
    "model.decoder.embed_tokens.weight",
)


def rename_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        if name in EMBEDDING_NAMES:
            out["embed_tokens.weight"] = w  # one table shared by encoder, decoder and head
        elif name.endswith("embed_positions.weight"):
            continue  # fixed sinusoids: our model computes them
        elif name == "final_logits_bias":
            out["final_logits_bias"] = w.reshape(-1)  # stored as (1, vocab)
        elif name == "lm_head.weight":
            # Tied checkpoints may store the shared table only under this name.
            out.setdefault("embed_tokens.weight" if config.tie_embeddings else "lm_head.weight", w)
        elif m := re.fullmatch(r"model\.(encoder|decoder)\.layers\.(\d+)\.(.+)\.(weight|bias)", name):
            if m[3] not in LAYER_NAMES:
                raise ModelLoadError(f"unexpected Marian weight {name!r}")
            out[f"{m[1]}.layers.{m[2]}.{LAYER_NAMES[m[3]]}.{m[4]}"] = w
        else:
            raise ModelLoadError(f"unexpected Marian weight {name!r}")
    return out
