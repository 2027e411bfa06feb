"""Gemma 3 (text): Llama's parts rearranged, with sliding-window layers between global ones."""

from __future__ import annotations

import dataclasses
import re

import torch

from explorer.loading.errors import ModelLoadError
from explorer.model import ModelConfig

from . import llama
from .common import GgufArchitecture, with_hf_window, with_window

GLOBAL_EVERY = 6
LOCAL_ROPE_BASE = 10_000.0  # the sliding layers' rotary base (llama.cpp's, when the file does not say)


def read_config(hf: dict) -> ModelConfig:
    """Gemma 3 (text): Llama's parts rearranged. A norm before and after each sublayer, q/k norms,
    GeGLU (tanh GELU), embeddings scaled by sqrt(d_model), scores scaled by
    1/sqrt(query_pre_attn_scalar), and sliding-window layers between global ones, rotating with
    a base of their own."""
    for setting in ("final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention"):
        if hf.get(setting):
            raise ModelLoadError(f"this gemma3_text model sets {setting}, not supported yet")
    rope = hf.get("rope_parameters") or {}
    full, local = rope.get("full_attention") or {}, rope.get("sliding_attention") or {}
    scaling = hf.get("rope_scaling") or {}
    for params in (full, local, scaling):
        if params.get("rope_type", params.get("type", "default")) != "default":
            raise ModelLoadError(f"RoPE scaling {params.get('rope_type', params.get('type'))!r} is not supported")
    activation = hf.get("hidden_activation", "gelu_pytorch_tanh")
    base = llama.read_config({**hf, "hidden_act": activation, "rope_parameters": {}})
    config = dataclasses.replace(
        base, family="gemma3_text", qk_norm=True, sandwich_norm=True, scale_embeddings=True,
        attn_scale=float(hf.get("query_pre_attn_scalar", 256)) ** -0.5,
        rope_theta=float(full.get("rope_theta", hf.get("rope_theta", 1_000_000.0))),
        rope_local_theta=float(local.get("rope_theta", hf.get("rope_local_base_freq", LOCAL_ROPE_BASE))),
        tie_embeddings=hf.get("tie_word_embeddings", True), pad_token_id=hf.get("pad_token_id", 0),
    )  # fmt: skip
    window = hf.get("sliding_window", 4096)
    if hf.get("layer_types"):
        return with_hf_window(config, window, hf["layer_types"])
    return with_window(config, window, global_every(base.n_layers, hf.get("sliding_window_pattern", GLOBAL_EVERY)))


def global_every(n_layers: int, every: int) -> list[str]:
    """Gemma 3's layer pattern: every ``every``-th layer global ("full"), the others a window
    ("sliding"). transformers' default and what llama.cpp fixes in code: layers 5, 11, 17, ..."""
    return ["full" if (i + 1) % every == 0 else "sliding" for i in range(n_layers)]


NORM_NAMES = {
    "input_layernorm": "self_attn_norm",
    "post_attention_layernorm": "self_attn_norm_after",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "ffn_norm_after",
    "self_attn.q_norm": "self_attn.q_norm",
    "self_attn.k_norm": "self_attn.k_norm",
}


def rename_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Gemma's RMSNorm multiplies by (1 + weight): the stored weights get their 1 added here, so
    our RMSNorm (times weight) computes the same."""
    renamed: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        name = name.replace("model.language_model.", "model.")  # saved from the multimodal class
        if name == "model.norm.weight":
            renamed["decoder.final_norm.weight"] = w.float() + 1
        elif (m := re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.weight", name)) and m[2] in NORM_NAMES:
            renamed[f"decoder.layers.{m[1]}.{NORM_NAMES[m[2]]}.weight"] = w.float() + 1
        else:
            renamed |= llama.rename_weights({name: w}, config)
    return renamed


def as_llama_cpp_runs_it(config: ModelConfig) -> ModelConfig:
    """A Gemma 3 GGUF file, completed with what llama.cpp fixes in code rather than in the file:
    the layer pattern, the local layers' rotary base, the norms around each sublayer, √d on the
    embeddings, and 1/√head_dim on the scores. (The file's norms already hold 1 + weight.)"""
    types = global_every(config.n_layers, GLOBAL_EVERY) if config.sliding_window else None
    return dataclasses.replace(
        config, layer_types=types, rope_local_theta=LOCAL_ROPE_BASE,
        sandwich_norm=True, scale_embeddings=True, attn_scale=config.head_dim**-0.5,
    )  # fmt: skip


GGUF = GgufArchitecture("gemma3", family="gemma3_text", activation="gelu_tanh", complete=as_llama_cpp_runs_it)
