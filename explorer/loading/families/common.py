"""What several families share: activation names, the first of several end tokens, sliding windows
(from transformers' layer types), the two-row position offset, how a GGUF architecture differs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from explorer.loading.errors import ModelLoadError
from explorer.model import ModelConfig

ACTIVATION_NAMES = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
HF_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}  # transformers' name -> ours
POSITION_OFFSET = 2  # OPT's and BART's position tables start two rows early (a padding convention)


def activation(name: str) -> str:
    if name not in ACTIVATION_NAMES:
        raise ModelLoadError(f"activation {name!r} is not supported; supported: {sorted(ACTIVATION_NAMES)}")
    return ACTIVATION_NAMES[name]


def first(value):
    """Some configs give several end tokens; the explorer stops at the first."""
    return value[0] if isinstance(value, list) else value


def with_window(config: ModelConfig, window: int | None, layer_types: list[str] | None = None) -> ModelConfig:
    """A sliding attention window: on every layer, or on the layers ``layer_types`` marks "sliding"
    (the others "full")."""
    if not window or (layer_types is not None and "sliding" not in layer_types):
        return config
    return dataclasses.replace(config, sliding_window=int(window), layer_types=layer_types)


def with_hf_window(config: ModelConfig, window: int | None, hf_layer_types: list[str] | None = None) -> ModelConfig:
    """``with_window`` from transformers' layer types ("sliding_attention", "full_attention")."""
    if hf_layer_types is None:
        return with_window(config, window)
    unknown = sorted(set(hf_layer_types) - set(HF_LAYER_TYPES))
    if unknown:
        raise ModelLoadError(
            f"this {config.family} model has {', '.join(unknown)} layers, not supported yet; "
            f"the explorer reads {' and '.join(HF_LAYER_TYPES)} layers"
        )
    return with_window(config, window, [HF_LAYER_TYPES[t] for t in hf_layer_types])


def unchanged(config: ModelConfig) -> ModelConfig:
    return config


@dataclass(frozen=True)
class GgufArchitecture:
    """How llama.cpp writes a family's GGUF file: its ``general.architecture`` name, and what
    differs from the common layout (``explorer/loading/gguf_files.py``)."""

    name: str
    family: str  # ours (ModelConfig.family)
    activation: str = "silu"
    complete: Callable[[ModelConfig], ModelConfig] = unchanged  # what llama.cpp fixes in code, not in the file
    # A layer tensor the family stores its own way: (kind, (out, in) array, config) -> {our module: array},
    # or None for the common table (gguf_files.GGUF_LAYER_NAMES).
    tensor: Callable[[str, np.ndarray, ModelConfig], dict[str, np.ndarray] | None] | None = None
