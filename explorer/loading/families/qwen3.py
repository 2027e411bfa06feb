"""Qwen3: Qwen2 without the q/k/v biases, with an RMSNorm on each head's query and key."""

from __future__ import annotations

import dataclasses

from explorer.model import ModelConfig

from . import llama
from .common import GgufArchitecture
from .qwen2 import qwen_window


def read_config(hf: dict) -> ModelConfig:
    """Qwen3: Qwen2 without the q/k/v biases, with an RMSNorm on each head's query and key, and a
    head size of its own (not d_model / heads)."""
    return qwen_window(dataclasses.replace(llama.read_config(hf), family="qwen3", qk_norm=True), hf)


GGUF = GgufArchitecture("qwen3", family="qwen3")
