"""Checkpoint files -> (ModelConfig, state dict in our names) and a tokenizer.

Weights are read only from safetensors or GGUF files, never by unpickling, and no
checkpoint's own code is ever run (no ``trust_remote_code``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
import threading
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from explorer.model import ModelConfig

from . import file_lock
from .errors import ModelLoadError
from .families import convert
from .gguf_files import read_gguf

log = logging.getLogger("decoder_explorer")

OUR_CONFIG = "explorer_config.json"
# transformers imports its classes lazily, and its lazy module is not safe to import from several
# threads at once: a class of students opening a fresh server raised "cannot import name
# 'AutoTokenizer'" (issue 26). Tokenizers are read one at a time (each takes well under a second),
# and the app imports what they need before it serves (``import_tokenizer_classes``).
TOKENIZER_LOCK = threading.Lock()


def import_tokenizer_classes() -> tuple[type, type]:
    """transformers' AutoTokenizer and PreTrainedTokenizerFast, imported under the lock."""
    with TOKENIZER_LOCK:
        from transformers import AutoTokenizer, PreTrainedTokenizerFast

    return AutoTokenizer, PreTrainedTokenizerFast


def read_hf_folder(folder: Path) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """A Hugging Face checkpoint folder (config.json + *.safetensors) in our names."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ModelLoadError(f"the folder {folder.name!r} holds no config.json, so it is not a model checkpoint")
    weight_files = sorted(folder.glob("*.safetensors"))
    if not weight_files:
        pickled = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt")]
        hint = " It has only pickled weights, which are never loaded (they can run code)." if pickled else ""
        raise ModelLoadError(
            f"the folder {folder.name!r} holds no .safetensors weights.{hint} Convert the checkpoint "
            "to safetensors (model.save_pretrained(folder) does) and try again."
        )
    # Messages name the folder, never its absolute path: they are shown to users of the app.
    try:
        hf_config = json.loads(config_file.read_text())
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"the config.json of {folder.name!r} cannot be read ({type(error).__name__})") from error
    state: dict[str, torch.Tensor] = {}
    for file in weight_files:
        try:
            state.update(load_file(file))
        except (SafetensorError, OSError, ValueError) as error:  # a damaged or foreign file (not a MemoryError)
            raise ModelLoadError(f"{file.name} in {folder.name!r} is not a readable safetensors file") from error
    if not isinstance(hf_config, dict):
        raise ModelLoadError(f"the config.json of {folder.name!r} is not a JSON object")
    return convert(hf_config, state)


def load_tokenizer(folder: Path, **kwargs):
    auto_tokenizer, _ = import_tokenizer_classes()
    try:
        with TOKENIZER_LOCK:  # it imports the family's tokenizer class lazily, too
            return auto_tokenizer.from_pretrained(str(folder), trust_remote_code=False, **kwargs)
    except Exception as error:
        # A tokenizer's files fail in many libraries' ways (OSError, ValueError, JSON, sentencepiece),
        # which cannot be told from a bug: the user hears the kind (its text can hold absolute paths),
        # the log gets the traceback.
        log.exception("reading the tokenizer of %r failed: a damaged file, or a bug", folder.name)
        raise ModelLoadError(f"could not read the tokenizer of {folder.name!r} ({type(error).__name__})") from error


def save_converted(folder: Path, config: ModelConfig, state: dict[str, torch.Tensor], tokenizer, source: dict) -> None:
    """Write a converted checkpoint atomically: a half-written cache is never read."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        save_file({k: v.contiguous() for k, v in state.items()}, str(tmp / "model.safetensors"))
        (tmp / OUR_CONFIG).write_text(config.to_json())
        (tmp / "source.json").write_text(json.dumps(source))
        portable_tokenizer(tokenizer).save_pretrained(str(tmp))
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def portable_tokenizer(tokenizer):
    """The tokenizer as the generic fast tokenizer: its own tokenizer.json, special tokens and chat
    template. A model-specific class (GemmaTokenizer for a gemma3 GGUF) would rebuild itself its
    own way on reading the cache, which need not be how the file's tokenizer was read."""
    _, fast_tokenizer = import_tokenizer_classes()
    special = {k: v for k, v in tokenizer.special_tokens_map.items() if isinstance(v, str)}
    return fast_tokenizer(
        tokenizer_object=tokenizer.backend_tokenizer, chat_template=tokenizer.chat_template, **special
    )


def read_converted(folder: Path, source: dict) -> tuple[ModelConfig, dict[str, torch.Tensor]] | None:
    """A previously converted checkpoint, or None when absent, damaged, or made from another
    source (the caller then converts anew)."""
    try:
        if json.loads((folder / "source.json").read_text()) != source:
            return None
        config = cached_config(folder)
        if config is None:
            return None
        return config, load_file(str(folder / "model.safetensors"))
    except (OSError, ValueError, SafetensorError):
        return None


def cached_config(folder: Path) -> ModelConfig | None:
    """The cached conversion's config, or None (logged: the conversion then runs again, about 15 s
    for SmolLM2, on every start while it fails) when its fields are not ModelConfig's: written by
    another version of this code, or a bug in writing or reading it. OSError and a damaged JSON
    (ValueError) go to the caller, as an absent or damaged cache."""
    text = (folder / OUR_CONFIG).read_text()
    try:
        return ModelConfig.from_json(text)
    except TypeError as error:
        log.warning(
            "The converted model in %s has a config this version cannot read (TypeError: %s); converting it again.",
            folder, error,
        )  # fmt: skip
        return None


def source_of(gguf_path: Path) -> dict:
    """What a conversion was made from, kept beside it: a cache made from another file is not read."""
    return {"gguf": gguf_path.name, "size": gguf_path.stat().st_size, "format": 1}


def load_gguf_with_cache(gguf_path: Path, cache_folder: Path, progress: bool = True):
    """The GGUF converted once into a safetensors cache; later loads read the cache.

    Returns (config, state, tokenizer, converted_now).
    """
    source = source_of(gguf_path)
    cached = read_converted(cache_folder, source)
    if cached is not None:
        return (*cached, load_tokenizer(cache_folder), False)
    with file_lock.held(cache_folder.with_name(f".{cache_folder.name}.lock")):
        cached = read_converted(cache_folder, source)  # converted by another process while this one waited
        if cached is not None:
            return (*cached, load_tokenizer(cache_folder), False)
        return (*convert_into(gguf_path, cache_folder, progress), True)


def convert_into(gguf_path: Path, cache_folder: Path, progress: bool = True):
    """(config, state, tokenizer) read from the GGUF, and written to ``cache_folder`` when it can be."""
    config, state = read_gguf(gguf_path, progress=progress)
    tokenizer = load_tokenizer(gguf_path.parent, gguf_file=gguf_path.name)
    with contextlib.suppress(OSError):  # a read-only cache folder only costs speed next time
        save_converted(cache_folder, config, state, tokenizer, source_of(gguf_path))
    return config, state, tokenizer
