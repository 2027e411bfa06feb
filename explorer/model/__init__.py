"""The transparent transformer: pure PyTorch, no Hugging Face imports."""

from .batch import CacheBatch, PagedBatch
from .cache import KVCache, LayerKV
from .config import ModelConfig
from .interventions import ablate_heads, ablate_sublayer, patch_values
from .taps import Intervention, Tap
from .trace import ATTENTION, NOTHING, Record, Trace
from .transformer import ContextWindowError, DecoderOnlyLM, EncoderDecoderLM, LanguageModel, Output, build_model

__all__ = [
    "ATTENTION", "NOTHING", "CacheBatch", "ContextWindowError", "DecoderOnlyLM", "EncoderDecoderLM", "Intervention",
    "KVCache", "LanguageModel", "LayerKV", "ModelConfig", "Output", "PagedBatch", "Record", "Tap", "Trace",
    "ablate_heads", "ablate_sublayer", "build_model", "patch_values",
]  # fmt: skip
