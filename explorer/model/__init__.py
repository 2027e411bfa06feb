"""The transparent transformer: pure PyTorch, no Hugging Face imports."""

from .batch import CacheBatch, PagedBatch, SplitBatch, batch_of
from .cache import KVCache, LayerKV
from .config import ModelConfig
from .interventions import ablate_heads, ablate_sublayer, patch_values
from .taps import Intervention, Tap
from .trace import ATTENTION, NOTHING, Record, Trace
from .transformer import ContextWindowError, DecoderOnlyLM, EncoderDecoderLM, LanguageModel, Output, build_model

__all__ = [
    "ATTENTION", "NOTHING", "CacheBatch", "ContextWindowError", "DecoderOnlyLM", "EncoderDecoderLM", "Intervention",
    "KVCache", "LanguageModel", "LayerKV", "ModelConfig", "Output", "PagedBatch", "Record", "SplitBatch", "Tap",
    "Trace", "ablate_heads", "ablate_sublayer", "batch_of", "build_model", "patch_values",
]  # fmt: skip
