"""The models this server has loaded, shared by every user (weights are read-only).

Sessions are per user; the store loads a model once and gives every caller the same copy. A live
session holds its model (``LoadedModel.users``, weakly): the store never lets go of a model a live
session uses, and a model it let go that is still in memory (a session still reads it) is taken
back, never loaded a second time. It lets a model go on an explicit unload when no session uses it,
and under its memory budget (``DECODER_EXPLORER_MODEL_MEMORY_MB``): after a load, the least recently
used models that no session uses go until the models fit.

Which models a user may name is the operator's choice: the registry's models listed in
``DECODER_EXPLORER_MODELS`` (comma-separated; all of them when it is not set); local folders only
below the folders listed in ``DECODER_EXPLORER_MODEL_DIRS`` (separated by ``:``; a checkpoint
folder, or a ``.gguf`` file); Hub ids only when ``DECODER_EXPLORER_ALLOW_HUB_IDS=1``.
"""

from __future__ import annotations

import gc
import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from explorer.analysis.snapshot import shown
from explorer.loading import DEFAULT_MODEL, LoadedModel, ModelLoadError, list_models, load_model
from explorer.loading.registry import HUB_ID, REGISTRY

MODEL_ENV = "DECODER_EXPLORER_MODEL"  # the model a page opens with
MODEL_DIRS_ENV = "DECODER_EXPLORER_MODEL_DIRS"
ALLOW_HUB_ENV = "DECODER_EXPLORER_ALLOW_HUB_IDS"
MODELS_ENV = "DECODER_EXPLORER_MODELS"  # the registry's models a visitor may load (default: all)
MODEL_MEMORY_ENV = "DECODER_EXPLORER_MODEL_MEMORY_MB"
# The models' share of a 16 GB Space: the three offered (~1.7 GB in float32) and room for more;
# sessions' caches, Gradio and a model's first conversion need the rest.
MODEL_MEMORY_MB = 4096

_kept: OrderedDict[str, LoadedModel] = OrderedDict()  # the store's own references, least recently used first
_alive: weakref.WeakValueDictionary[str, LoadedModel] = weakref.WeakValueDictionary()  # every one still in memory
_sizes: dict[str, int] = {}  # bytes of each model's weights, measured once at its load
_lock = threading.Lock()  # guards the dicts above
_loading: dict[str, threading.Lock] = {}  # one lock per model: a slow load never blocks the others


def allowed_model_dirs() -> list[Path]:
    raw = os.environ.get(MODEL_DIRS_ENV, "")
    return [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]


def custom_models_allowed() -> bool:
    return bool(allowed_model_dirs()) or os.environ.get(ALLOW_HUB_ENV) == "1"


def offered_names() -> frozenset[str] | None:
    """The registry's models a visitor may load (``DECODER_EXPLORER_MODELS``); None: all of them."""
    raw = os.environ.get(MODELS_ENV, "")
    names = frozenset(name.strip() for name in raw.split(",") if name.strip())
    return names or None


def is_offered(name: str) -> bool:
    """Whether a visitor may load ``name``: any model outside the registry is the business of
    ``resolve_custom``; a registry model only when the operator offers it."""
    offered = offered_names()
    return offered is None or name not in REGISTRY or name in offered


def offered_models() -> list:
    """The registry's entries (``list_models``) that this server offers."""
    return [entry for entry in list_models() if is_offered(entry.name)]


def dropdown_choices() -> list[tuple[str, str]]:
    """(label, name) pairs of the models offered; models that cannot load now say why in their label."""
    choices = []
    for entry in offered_models():
        # Short: the box shows it whole, also at 390 px, where "(decoder, embedded)" ran into the
        # arrow. A model shipped with the app is the unmarked case; only a Hub model says so.
        kind = "translator" if entry.is_encoder_decoder else "decoder"
        label = f"{entry.name} ({kind})" if entry.source == "embedded" else f"{entry.name} ({kind}, Hub)"
        if not entry.available:
            label += " — unavailable"
        choices.append((label, entry.name))
    return choices


def checked_name(name) -> str:
    """``name`` if it is a model name a visitor may ask for; a refusal that says what to do otherwise
    (a null or an object from a raw call, a model the operator does not offer)."""
    if not isinstance(name, str):
        raise ModelLoadError(f"A model is named by text (this is {shown(name)}). Choose one from the list.")
    if not is_offered(name):
        offered = ", ".join(sorted(offered_names() or ()))
        raise ModelLoadError(f"{shown(name)} is not offered on this server. Choose one of: {offered}.")
    return name


def resolve_custom(text: str) -> str:
    """Check a user-typed folder or Hub id against the operator's allow-list."""
    text = checked_name(text).strip()
    if text in REGISTRY:
        return checked_name(text)
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
    """The model, loaded once: every caller gets the same copy while it is in memory."""
    name = checked_name(name)
    with _lock:
        loaded = _taken(name)
        if loaded is not None:
            return loaded
        model_lock = _loading.setdefault(name, threading.Lock())
    with model_lock:
        with _lock:
            loaded = _taken(name)
        if loaded is None:
            loaded = load_model(name, progress=progress)
            with _lock:
                _kept[name] = _alive[name] = loaded
                _sizes[name] = weight_bytes(loaded)
            make_room(keep=name)
        return loaded


def _taken(name: str) -> LoadedModel | None:
    """The model if it is in memory (kept, or let go but still read by a session: taken back, so that
    there is never a second copy), now the most recently used; else None. Called with ``_lock`` held."""
    loaded = _kept.get(name) or _alive.get(name)
    if loaded is not None:
        _kept[name] = loaded
        _kept.move_to_end(name)
    return loaded


def weight_bytes(loaded: LoadedModel) -> int:
    """The bytes of a model's weights and buffers (a tensor shared by two modules counted once)."""
    tensors = {t.data_ptr(): t for t in (*loaded.model.parameters(), *loaded.model.buffers())}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def memory_budget_bytes() -> int:
    """How much the models may hold together (``DECODER_EXPLORER_MODEL_MEMORY_MB``)."""
    return int(float(os.environ.get(MODEL_MEMORY_ENV) or MODEL_MEMORY_MB) * 2**20)


def models_bytes() -> int:
    """The bytes of every model in memory (kept by the store or still read by a session)."""
    with _lock:
        return sum(_sizes.get(name, 0) for name in list(_alive.keys()))


def make_room(keep: str | None = None) -> list[str]:
    """Under the memory budget: let go of the least recently used models that no live session uses
    (never ``keep``, the one just loaded) until the models fit, or none is left to let go. The names
    of those let go. A model too large for the budget alone still loads: the budget frees, it never refuses."""
    if models_bytes() <= memory_budget_bytes():
        return []
    gc.collect()  # sessions in reference cycles that nothing reaches let go of their models first
    let_go = []
    with _lock:
        for name in list(_kept):
            if sum(_sizes.get(n, 0) for n in list(_alive.keys())) <= memory_budget_bytes():
                break
            if name != keep and not _kept[name].users:
                del _kept[name]  # freed now, unless a caller between get_model and its session holds it
                let_go.append(name)
    return let_go


def already_loaded(name: str) -> LoadedModel | None:
    """The model if this process has it in memory (never starts a load)."""
    with _lock:
        return _kept.get(name) or _alive.get(name)


def default_model_name() -> str:
    """The model a page opens with: ``DECODER_EXPLORER_MODEL``, else SmolLM2; the first model offered
    when the operator's list (``DECODER_EXPLORER_MODELS``) leaves that one out."""
    chosen = os.environ.get(MODEL_ENV, DEFAULT_MODEL)
    offered = offered_names()
    if offered is None or chosen not in REGISTRY or chosen in offered:
        return chosen
    return next((name for name in REGISTRY if name in offered), chosen)


@dataclass(frozen=True)
class Unloaded:
    """What an explicit unload did: whether the model was in memory, how many live sessions still
    use it (then it stays), and whether its memory went back."""

    was_loaded: bool
    users: int
    freed: bool


def unload_model(name: str) -> Unloaded:
    """Let go of a model no live session uses; a model in use stays (its users' hold is theirs, not
    the caller's). A later ``get_model`` loads it again only once it has left memory."""
    if not is_loaded(name):
        return Unloaded(was_loaded=False, users=0, freed=False)
    gc.collect()  # sessions already gone (a closed tab's, in a reference cycle) are not users
    with _lock:
        loaded = _kept.get(name) or _alive.get(name)
        users = 0 if loaded is None else len(loaded.users)
        if loaded is None or users:
            return Unloaded(was_loaded=loaded is not None, users=users, freed=False)
        _kept.pop(name, None)  # (already let go when only a caller without a session still reads it)
    del loaded
    if is_loaded(name):
        gc.collect()  # a model in a reference cycle of its own
    return Unloaded(was_loaded=True, users=0, freed=not is_loaded(name))


def is_loaded(name: str) -> bool:
    """Whether the model is in memory (kept by the store, or still read by someone). A name that is
    no text (a raw call's list or object, refused by ``get_model``) names no model in memory."""
    if not isinstance(name, str):
        return False
    with _lock:
        return name in _kept or name in _alive
