"""Mistral: Llama with a sliding attention window on every layer."""

from __future__ import annotations

import dataclasses

from explorer.model import ModelConfig

from . import llama
from .common import with_hf_window


def read_config(hf: dict) -> ModelConfig:
    """Mistral: Llama's design with a sliding attention window on every layer."""
    return with_hf_window(dataclasses.replace(llama.read_config(hf), family="mistral"), hf.get("sliding_window"))
