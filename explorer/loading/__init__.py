"""Checkpoints in, (ModelConfig, weights in our names) and a tokenizer out.

Transformers is used here (tokenizers, GGUF tokenizer conversion), never in explorer/model.
"""

from .errors import ModelLoadError, ModelUnavailableError, UnknownModelError
from .registry import DEFAULT_MODEL, TRANSLATOR_MODEL, LoadedModel, ModelEntry, list_models, load_model
from .sources import CACHE_ENV, SMOLLM2_PIP, cache_root

__all__ = [
    "CACHE_ENV", "DEFAULT_MODEL", "SMOLLM2_PIP", "TRANSLATOR_MODEL", "LoadedModel", "ModelEntry",
    "ModelLoadError", "ModelUnavailableError", "UnknownModelError", "cache_root", "list_models", "load_model",
]  # fmt: skip
