"""GPT-2: learned positions, LayerNorm, GELU. Its projections are Conv1D (in, out) matrices with
Q, K and V fused, so they are transposed and split.
"""

from __future__ import annotations

import re

import torch

from explorer.loading.errors import ModelLoadError
from explorer.model import ModelConfig

from .common import activation


def read_config(hf: dict) -> ModelConfig:
    d = hf["n_embd"]
    return ModelConfig(
        family="gpt2",
        vocab_size=hf["vocab_size"],
        d_model=d,
        n_layers=hf["n_layer"],
        n_heads=hf["n_head"],
        d_ff=hf.get("n_inner") or 4 * d,
        max_positions=hf["n_positions"],
        norm="layer",
        norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        norm_first=True,
        positions="learned",
        activation=activation(hf.get("activation_function", "gelu_new")),
        tie_embeddings=hf.get("tie_word_embeddings", True),
        bos_token_id=hf.get("bos_token_id"),
        eos_token_id=hf.get("eos_token_id"),
    )


def rename_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    d = config.d_model
    for name, w in hf_state.items():
        name = name.removeprefix("transformer.")
        if name in ("wte.weight",):
            out["embed_tokens.weight"] = w
        elif name == "wpe.weight":
            out["decoder.embed.positions.weight"] = w
        elif name.startswith("ln_f."):
            out["decoder.final_norm." + name.split(".")[-1]] = w
        elif name == "lm_head.weight":
            out["lm_head.weight"] = w  # dropped when tied (families/__init__.py)
        elif m := re.fullmatch(r"h\.(\d+)\.(.+)", name):
            layer, rest = f"decoder.layers.{m[1]}", m[2]
            if rest in ("attn.bias", "attn.masked_bias"):
                continue  # causal-mask buffers of old checkpoints, not weights
            if rest.startswith("attn.c_attn."):
                kind = rest.split(".")[-1]
                fused = w.t() if kind == "weight" else w  # Conv1D (in, 3d) -> (3d, in)
                for proj, part in zip(("q_proj", "k_proj", "v_proj"), fused.split(d, dim=0), strict=True):
                    out[f"{layer}.self_attn.{proj}.{kind}"] = part.contiguous()
                continue
            simple = {
                "attn.c_proj": "self_attn.o_proj",
                "mlp.c_fc": "ffn.up_proj",
                "mlp.c_proj": "ffn.down_proj",
                "ln_1": "self_attn_norm",
                "ln_2": "ffn_norm",
            }
            module, kind = rest.rsplit(".", 1)
            if module not in simple:
                raise ModelLoadError(f"unexpected GPT-2 weight {name!r}")
            is_conv = module.startswith(("attn.", "mlp.")) and kind == "weight"
            out[f"{layer}.{simple[module]}.{kind}"] = w.t().contiguous() if is_conv else w
        else:
            raise ModelLoadError(f"unexpected GPT-2 weight {name!r}")
    return out
