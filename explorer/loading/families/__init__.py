"""The model families the explorer reads, one file each: how a checkpoint's config.json becomes a
``ModelConfig``, how its weights are renamed into ours and, for the families llama.cpp writes, how a
GGUF file differs from the common layout (``GGUF``).

    FAMILIES            config.json's model_type -> Family
    GGUF_ARCHITECTURES  a GGUF file's general.architecture -> GgufArchitecture
    convert             (config.json, state dict) -> (ModelConfig, state dict in our names)

A new family is one new file here and one line in ``FAMILIES``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from explorer.loading.errors import ModelLoadError
from explorer.model import ModelConfig

from . import bart, gemma3, gpt2, gpt_neox, llama, marian, mistral, opt, phi3, qwen2, qwen3, t5
from .common import GgufArchitecture

log = logging.getLogger("decoder_explorer")
State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Family:
    read_config: Callable[[dict], ModelConfig]  # config.json -> ModelConfig
    rename_weights: Callable[[State, ModelConfig], State]  # transformers' names -> ours


FAMILIES = {
    "gpt2": Family(gpt2.read_config, gpt2.rename_weights),
    "llama": Family(llama.read_config, llama.rename_weights),
    "qwen2": Family(qwen2.read_config, llama.rename_weights),
    "qwen3": Family(qwen3.read_config, llama.rename_weights),
    "mistral": Family(mistral.read_config, llama.rename_weights),
    "phi3": Family(phi3.read_config, phi3.rename_weights),
    "opt": Family(opt.read_config, opt.rename_weights),
    "gpt_neox": Family(gpt_neox.read_config, gpt_neox.rename_weights),
    "gemma3_text": Family(gemma3.read_config, gemma3.rename_weights),
    "marian": Family(marian.read_config, marian.rename_weights),
    "bart": Family(bart.read_config, bart.rename_weights),
    "mbart": Family(bart.read_config, bart.rename_weights),
    "t5": Family(t5.read_config, t5.rename_weights),
}
GGUF_ARCHITECTURES = {arch.name: arch for arch in (llama.GGUF, qwen2.GGUF, qwen3.GGUF, gemma3.GGUF, phi3.GGUF)}


def convert(hf_config: dict, hf_state: State) -> tuple[ModelConfig, State]:
    """A Hugging Face checkpoint (its config.json and its weights) in our config and names."""
    family = hf_config.get("model_type")
    if family not in FAMILIES:
        raise ModelLoadError(
            f"model type {family!r} is not supported; the explorer reads {', '.join(sorted(FAMILIES))} checkpoints"
        )
    read_config = FAMILIES[family].read_config
    try:
        config = read_config(ConfigJson(hf_config))
    except (TypeError, ValueError) as error:
        # A value of the wrong kind ("n_layer": "twelve") cannot be told from a bug in the
        # function that read it: the user hears the first, the log gets the traceback.
        where = f"{read_config.__module__}.{read_config.__qualname__}"
        log.exception("reading a %s config.json failed: a malformed file, or a bug in %s", family, where)
        raise ModelLoadError(f"this {family} config.json is malformed ({type(error).__name__}: {error})") from error
    return config, without_tied_head(FAMILIES[family].rename_weights(hf_state, config), config)


def without_tied_head(state: State, config: ModelConfig) -> State:
    """The one rule for a tied output head: the model reads the embedding table, so a stored
    ``lm_head`` (a copy of it) is dropped."""
    if config.tie_embeddings:
        state.pop("lm_head.weight", None)
    return state


class MissingConfigField(ModelLoadError):
    """A field a family's config.json must have is not there."""


class ConfigJson(dict):
    """A checkpoint's config.json: a missing field is the file's fault, said as such. (A KeyError
    from anything else, a bug, stays a KeyError and reaches the log.)"""

    def __missing__(self, key):
        raise MissingConfigField(f"this {self.get('model_type')} config.json is incomplete: it has no {key!r}")


__all__ = ["FAMILIES", "GGUF_ARCHITECTURES", "Family", "GgufArchitecture", "MissingConfigField", "convert"]
