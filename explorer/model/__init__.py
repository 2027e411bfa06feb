"""The transparent transformer: pure PyTorch, no Hugging Face imports."""

from .cache import KVCache, LayerKV
from .config import ModelConfig
from .trace import ATTENTION, NOTHING, Record, Trace
from .transformer import ContextWindowError, DecoderOnlyLM, EncoderDecoderLM, LanguageModel, Output, build_model

__all__ = [
    "ATTENTION", "NOTHING", "ContextWindowError", "DecoderOnlyLM", "EncoderDecoderLM", "KVCache",
    "LanguageModel", "LayerKV", "ModelConfig", "Output", "Record", "Trace", "build_model",
]  # fmt: skip
