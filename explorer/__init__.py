"""Decoder Explorer: see how a transformer decoder generates text, one token at a time.

>>> import explorer
>>> loaded = explorer.load_model("smollm2-135m-instruct")
>>> session = explorer.GenerationSession(loaded, "The capital of France is")
>>> step = session.step()
>>> session.self_attention(layer=0).shape  # (heads, T, T)
"""

from explorer import cache_policies
from explorer.analysis.cache_modes import CacheComparison, compare_cache_modes
from explorer.analysis.circuits import Carried, Composition, WhyAttends, composition, what_it_carries, why_attends
from explorer.analysis.two_models import TwoModels, compare_models
from explorer.experiments import Intervention, ablate_heads, ablate_sublayer, patch, tap_values
from explorer.loading import LoadedModel, ModelEntry, ModelLoadError, list_models, load_model
from explorer.model import ContextWindowError
from explorer.session import GenerationSession, InputError, SessionFinished, StepResult

__all__ = [
    "CacheComparison", "Carried", "Composition", "ContextWindowError", "GenerationSession", "InputError",
    "Intervention", "LoadedModel", "ModelEntry", "ModelLoadError", "SessionFinished", "StepResult", "TwoModels",
    "WhyAttends", "ablate_heads", "ablate_sublayer", "cache_policies", "compare_cache_modes", "compare_models",
    "composition", "list_models", "load_model", "patch", "tap_values", "what_it_carries", "why_attends",
]  # fmt: skip
