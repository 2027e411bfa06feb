"""The models this server has loaded, shared by every user (weights are read-only).

Sessions are per user; a model is loaded once per process and kept. Which models a user may
name beyond the registry is the operator's choice: local folders only below the folders
listed in ``DECODER_EXPLORER_MODEL_DIRS`` (separated by ``:``; a checkpoint folder, or a
``.gguf`` file), Hub ids only when
``DECODER_EXPLORER_ALLOW_HUB_IDS=1``.
"""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path

from explorer.loading import DEFAULT_MODEL, LoadedModel, ModelLoadError, list_models, load_model
from explorer.loading.registry import HUB_ID, REGISTRY

MODEL_ENV = "DECODER_EXPLORER_MODEL"  # the model a page opens with
MODEL_DIRS_ENV = "DECODER_EXPLORER_MODEL_DIRS"
ALLOW_HUB_ENV = "DECODER_EXPLORER_ALLOW_HUB_IDS"

_loaded: dict[str, LoadedModel] = {}
_lock = threading.Lock()  # guards the two dicts
_loading: dict[str, threading.Lock] = {}  # one lock per model: a slow load never blocks the others


def allowed_model_dirs() -> list[Path]:
    raw = os.environ.get(MODEL_DIRS_ENV, "")
    return [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]


def custom_models_allowed() -> bool:
    return bool(allowed_model_dirs()) or os.environ.get(ALLOW_HUB_ENV) == "1"


def dropdown_choices() -> list[tuple[str, str]]:
    """(label, name) pairs; models that cannot load now say why in their label."""
    choices = []
    for entry in list_models():
        # Short: the box shows it whole, also at 390 px, where "(decoder, embedded)" ran into the
        # arrow. A model shipped with the app is the unmarked case; only a Hub model says so.
        kind = "translator" if entry.is_encoder_decoder else "decoder"
        label = f"{entry.name} ({kind})" if entry.source == "embedded" else f"{entry.name} ({kind}, Hub)"
        if not entry.available:
            label += " — unavailable"
        choices.append((label, entry.name))
    return choices


def resolve_custom(text: str) -> str:
    """Check a user-typed folder or Hub id against the operator's allow-list."""
    text = text.strip()
    if text in REGISTRY:
        return text
    for root in allowed_model_dirs():
        try:
            candidate = (root / text).resolve() if not Path(text).is_absolute() else Path(text).resolve()
            is_model = candidate.is_dir() or (candidate.suffix == ".gguf" and candidate.is_file())
            if candidate.is_relative_to(root) and is_model:
                return str(candidate)
        except (OSError, ValueError):  # a name too long, or with a NUL: no such folder
            continue
    if os.environ.get(ALLOW_HUB_ENV) == "1" and HUB_ID.match(text) and ".." not in text:
        return text
    raise ModelLoadError(
        "That model is not offered here. Choose one from the list; local folders are accepted only "
        f"inside the folders the operator allows ({MODEL_DIRS_ENV})."
    )


def public_name(name: str) -> str:
    """A model name fit to show and to put in a link: a local folder relative to the allowed
    folder holding it (``resolve_custom`` accepts that back), never the server's absolute path."""
    path = Path(name)
    if path.is_absolute():
        for root in allowed_model_dirs():
            if path.is_relative_to(root):
                return str(path.relative_to(root))
        return path.name
    return name


def get_model(name: str, progress: bool = True) -> LoadedModel:
    """Load once per process; later calls return the same object."""
    with _lock:
        if name in _loaded:
            return _loaded[name]
        model_lock = _loading.setdefault(name, threading.Lock())
    with model_lock:
        if name not in _loaded:
            loaded = load_model(name, progress=progress)
            with _lock:
                _loaded[name] = loaded
        return _loaded[name]


def already_loaded(name: str) -> LoadedModel | None:
    """The model if this process has loaded it (never starts a load)."""
    with _lock:
        return _loaded.get(name)


def default_model_name() -> str:
    return os.environ.get(MODEL_ENV, DEFAULT_MODEL)


def unload_model(name: str) -> bool:
    """Forget a loaded model, so that its memory goes back once no session still reads it (a
    session on it, in any browser tab, keeps it alive until it ends). Whether it was loaded; a
    later ``get_model`` loads it again."""
    with _lock:
        loaded = _loaded.pop(name, None)
    if loaded is None:
        return False
    del loaded
    gc.collect()
    return True


def is_loaded(name: str) -> bool:
    with _lock:
        return name in _loaded
