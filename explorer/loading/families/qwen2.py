"""Qwen2 and Qwen2.5: Llama with biases on the query, key and value projections, and an optional
window on the later layers.
"""

from __future__ import annotations

import dataclasses

from explorer.model import ModelConfig

from . import llama
from .common import GgufArchitecture, with_hf_window


def qwen_window(config: ModelConfig, hf: dict) -> ModelConfig:
    """Qwen's optional window: on the layers from max_window_layers on, unless layer_types says."""
    if not hf.get("use_sliding_window"):
        return config
    types = hf.get("layer_types")
    if types is None:
        first = hf.get("max_window_layers", 28)
        types = ["sliding_attention" if i >= first else "full_attention" for i in range(config.n_layers)]
    return with_hf_window(config, hf.get("sliding_window"), types)


def read_config(hf: dict) -> ModelConfig:
    """Qwen2 and Qwen2.5: Llama's design, with biases on the query, key and value projections
    (none on the output projection); the weights are named as Llama's."""
    config = llama.read_config({**hf, "attention_bias": False})
    return qwen_window(dataclasses.replace(config, family="qwen2", qkv_bias=True, out_bias=False), hf)


GGUF = GgufArchitecture("qwen2", family="qwen2")
