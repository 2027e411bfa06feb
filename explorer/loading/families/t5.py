"""T5 and Flan-T5: relative position buckets, RMSNorm, no biases; sublayers named by index."""

from __future__ import annotations

import re

import torch

from explorer.loading.errors import ModelLoadError
from explorer.model import ModelConfig

from .common import activation, first


def read_config(hf: dict) -> ModelConfig:
    """T5 and Flan-T5: relative position buckets added to the scores instead of position vectors,
    RMSNorm (no mean, no bias), no 1/sqrt(d) on the scores, no biases anywhere; ReLU, or gated
    GELU (T5 v1.1, Flan-T5). Original T5 shares its output head with the embeddings and scales
    the last residual by 1/sqrt(d_model) first."""
    proj = hf.get("feed_forward_proj", "relu")
    gated = proj.startswith("gated-")
    act = "gelu_new" if proj == "gated-gelu" else proj.removeprefix("gated-")
    scaled = hf.get("scale_decoder_outputs", hf.get("tie_word_embeddings", True) is not False)
    d = hf["d_model"]
    return ModelConfig(
        family="t5", vocab_size=hf["vocab_size"], d_model=d, n_layers=hf.get("num_decoder_layers") or hf["num_layers"],
        n_encoder_layers=hf["num_layers"], is_encoder_decoder=True, n_heads=hf["num_heads"], head_dim=hf["d_kv"],
        d_ff=hf["d_ff"], max_positions=hf.get("n_positions", 512), norm="rms",
        norm_eps=hf.get("layer_norm_epsilon", 1e-6), positions="relative",
        relative_buckets=hf.get("relative_attention_num_buckets", 32),
        relative_max_distance=hf.get("relative_attention_max_distance", 128), attn_scale=1.0,
        activation=activation(act), gated_ffn=gated, qkv_bias=False, out_bias=False, ffn_bias=False,
        tie_embeddings=False, output_scale=d**-0.5 if scaled else 1.0, pad_token_id=hf.get("pad_token_id", 0),
        eos_token_id=first(hf.get("eos_token_id", 1)),
        decoder_start_token_id=hf.get("decoder_start_token_id", hf.get("pad_token_id", 0)),
    )  # fmt: skip


SUBLAYERS = {  # (stack, sublayer index) -> our sublayer
    ("encoder", "0"): "self_attn", ("encoder", "1"): "ffn",
    ("decoder", "0"): "self_attn", ("decoder", "1"): "cross_attn", ("decoder", "2"): "ffn",
}  # fmt: skip


MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "wi": "up_proj", "wi_0": "gate_proj",
              "wi_1": "up_proj", "wo": "down_proj"}  # fmt: skip


def rename_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """T5 names its sublayers by index (block.i.layer.j); the relative bias lives in block 0's
    self-attention and serves every layer of its stack. The output head is kept apart (tied
    checkpoints store only the shared table)."""
    out: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        if name in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
            out["embed_tokens.weight"] = w
            out.setdefault("lm_head.weight", w)
        elif name == "lm_head.weight":
            out["lm_head.weight"] = w
        elif m := re.fullmatch(r"(encoder|decoder)\.final_layer_norm\.weight", name):
            out[f"{m[1]}.final_norm.weight"] = w
        elif m := re.fullmatch(
            r"(encoder|decoder)\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.weight", name
        ):
            out[f"{m[1]}.relative.table.weight"] = w
        elif (m := re.fullmatch(r"(encoder|decoder)\.block\.(\d+)\.layer\.(\d)\.(.+)\.weight", name)) and (
            sublayer := SUBLAYERS.get((m[1], m[3]))
        ):
            layer, module = f"{m[1]}.layers.{m[2]}", m[4]
            if module == "layer_norm":
                out[f"{layer}.{sublayer}_norm.weight"] = w
            elif (kind := module.rsplit(".", 1)[-1]) in MODULES:
                out[f"{layer}.{sublayer}.{MODULES[kind]}.weight"] = w
            else:
                raise ModelLoadError(f"unexpected T5 weight {name!r}")
        else:
            raise ModelLoadError(f"unexpected T5 weight {name!r}")
    return out
