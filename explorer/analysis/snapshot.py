"""Saving a session to one file, reading it back, and links that reopen a session.

A saved session is a NumPy ``.npz`` (read with ``allow_pickle=False``: no code runs on
load) holding a JSON description (model, input, settings, tokens, what was on screen) and
the attention the session recorded, float16, the causal self-attention as its lower
triangle only. Restoring replays the recorded tokens through the model (keeping which
ones the user forced), so the restored session is a live one that can step on; the
attention it recomputes is compared with the file's.

A link carries the same description in its query string, without the arrays.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from urllib.parse import urlencode

import numpy as np

from explorer import cache_policies, sampling
from explorer.analysis import session_file
from explorer.analysis.session_file import SavedArrays
from explorer.loading import LoadedModel
from explorer.present.tabs import DEFAULT_TAB, TAB_IDS  # plain data: the page's tabs, listed once
from explorer.session import MAX_SESSION_POSITIONS, MAX_TEXT_CHARS, GenerationSession, InputError

FORMAT = "decoder-explorer-session"
VERSION = 1
MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_LINK_CHARS = 8000  # longer URLs are cut by some servers and chat apps


@dataclass
class Snapshot:
    """Everything needed to rebuild a session and its view."""

    model: str
    text: str
    chat: bool = False
    use_cache: bool = True
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    generated: list[int] = field(default_factory=list)  # token ids after the prompt
    forced: list[int] = field(default_factory=list)  # which of them (indices into generated) the user forced
    layer: int = 0
    head: str = "mean"
    query: int | None = None
    tab: str = DEFAULT_TAB
    cache_policy: str = "full"  # explorer.cache_policies.policy_spec


def snapshot_of(model_name: str, session: GenerationSession, **view) -> Snapshot:
    forced = [s.position - session.prompt_length for s in session.steps if s.forced]
    s = session.sampling
    return Snapshot(
        model=model_name, text=session.text, chat=session.chat, use_cache=session.use_cache,
        temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, seed=s.seed,
        generated=list(session.generated_ids), forced=forced,
        cache_policy=cache_policies.policy_spec(session.cache_policy), **view,
    )  # fmt: skip


def restore(loaded: LoadedModel, snapshot: Snapshot) -> GenerationSession:
    """A live session with the snapshot's input, settings and tokens, each run through the model."""
    session = GenerationSession(
        loaded, snapshot.text, use_cache=snapshot.use_cache, chat=snapshot.chat and loaded.has_chat_template,
        temperature=snapshot.temperature, top_k=snapshot.top_k, top_p=snapshot.top_p, seed=snapshot.seed,
        cache_policy=cache_policies.parse_policy(snapshot.cache_policy),
    )  # fmt: skip
    session.replay(list(snapshot.generated), forced=set(snapshot.forced))
    return session


# ---------------------------------------------------------------- files
def session_arrays(session: GenerationSession) -> dict[str, np.ndarray]:
    """The recorded attention, float16; causal self-attention as its lower triangle (heads, T(T+1)/2)."""
    n = len(session.token_ids)
    lower = np.tril_indices(n)
    arrays = {
        "token_ids": np.array(session.token_ids, dtype=np.int64),
        "source_ids": np.array(session.source_ids, dtype=np.int64),
    }
    for i in range(session.config.n_layers):
        arrays[f"self_attention.{i}"] = session.self_attention(i)[:, lower[0], lower[1]].astype(np.float16)
        if session.is_encoder_decoder:
            arrays[f"cross_attention.{i}"] = session.cross_attention(i).astype(np.float16)
    for i in range(session.config.n_encoder_layers):
        arrays[f"encoder_attention.{i}"] = session.encoder_attention(i).astype(np.float16)
    return arrays


def save_bytes(snapshot: Snapshot, session: GenerationSession) -> bytes:
    """One compressed .npz: the description as JSON plus the attention arrays."""
    description = {"format": FORMAT, "version": VERSION, "snapshot": asdict(snapshot)}
    arrays = session_arrays(session)
    arrays["description"] = np.frombuffer(json.dumps(description).encode("utf-8"), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def read_bytes(data: bytes) -> tuple[Snapshot, SavedArrays]:
    """The snapshot and arrays of a saved session; a clear InputError for anything else.

    The arrays are read lazily (``session_file``): a file cannot make the server decompress
    more than the session it describes really holds."""
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"The file is larger than {MAX_FILE_BYTES // 2**20} MB; it is not a saved session.")
    text, arrays = session_file.open_archive(data)
    try:
        description = json.loads(text)
    except ValueError as error:
        raise InputError(session_file.NOT_OURS) from error
    if not isinstance(description, dict) or description.get("format") != FORMAT:
        raise InputError(session_file.NOT_OURS)
    if description.get("version") != VERSION:
        version = str(description.get("version"))[:20]
        raise InputError(f"This session file has version {version}; this explorer reads {VERSION}.")
    return checked_snapshot(description.get("snapshot")), arrays


def checked_snapshot(raw) -> Snapshot:
    """A Snapshot from untrusted JSON (a file, a link, the browser's kept copy): every field of
    the right type and in the range the page offers, or an InputError that names the field."""
    if not isinstance(raw, dict):
        raise InputError("The saved session has no description.")
    unknown = set(raw) - set(FIELD_CHECKS)
    if unknown or "model" not in raw or "text" not in raw:
        raise InputError("The saved session's description is damaged.")
    snapshot = Snapshot(**{name: FIELD_CHECKS[name](name, value) for name, value in raw.items()})
    forced = set(snapshot.forced)
    if len(forced) < len(snapshot.forced) or not forced <= set(range(len(snapshot.generated))):
        raise InputError("The saved session's forced tokens are not among its generated tokens.")
    if snapshot.tab not in TAB_IDS:
        snapshot.tab = DEFAULT_TAB
    return snapshot


def shown(value) -> str:
    """A short, safe rendering of an untrusted value for a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def text_field(limit: int) -> Callable:
    def check(name: str, value) -> str:
        if not isinstance(value, str) or len(value) > limit:
            raise InputError(
                f"The session's {name} must be text of at most {limit:,} characters (it is {shown(value)})."
            )
        return value

    return check


def boolean_field(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"The session's {name} must be true or false (it is {shown(value)}).")
    return value


def written(number: float) -> str:
    """A limit as a person reads it: 4,294,967,295 (not 4.29497e+09), 0.05."""
    return f"{int(number):,}" if float(number).is_integer() else f"{number:g}"


def number_field(low: float, high: float, whole: bool = False) -> Callable:
    """A number from ``low`` to ``high`` (finite; ``whole``: an integer, given as 3 or 3.0)."""
    kind = "a whole number" if whole else "a number"

    def check(name: str, value):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok and low <= value <= high and (not whole or float(value).is_integer())
        if not ok:
            limits = f"from {written(low)} to {written(high)}"
            raise InputError(f"The session's {name} must be {kind} {limits} (it is {shown(value)}).")
        return int(value) if whole else float(value)

    return check


def token_list_field(name: str, value) -> list[int]:
    whole = number_field(0, 2**31 - 1, whole=True)
    if not isinstance(value, list) or len(value) > MAX_SESSION_POSITIONS:
        raise InputError(f"The session's {name} must be a list of at most {MAX_SESSION_POSITIONS} token numbers.")
    return [whole(name, item) for item in value]


def policy_field(name: str, value) -> str:
    """A cache policy as ``cache_policies.policy_spec`` writes it (parsed, so that its numbers are checked)."""
    return cache_policies.policy_spec(cache_policies.parse_policy(value))


def optional_position(name: str, value) -> int | None:
    return None if value is None else number_field(0, MAX_SESSION_POSITIONS, whole=True)(name, value)


FIELD_CHECKS: dict[str, Callable] = {
    "model": text_field(1000), "text": text_field(MAX_TEXT_CHARS), "chat": boolean_field,
    "use_cache": boolean_field, "temperature": number_field(*sampling.TEMPERATURE_RANGE),
    "top_k": number_field(*sampling.TOP_K_RANGE, whole=True), "top_p": number_field(*sampling.TOP_P_RANGE),
    "seed": number_field(*sampling.SEED_RANGE, whole=True), "generated": token_list_field, "forced": token_list_field,
    "layer": number_field(0, 9999, whole=True), "head": text_field(20), "query": optional_position,
    "tab": text_field(40), "cache_policy": policy_field,
}  # fmt: skip


def attention_difference(session: GenerationSession, arrays: Mapping[str, np.ndarray]) -> float:
    """The largest difference between the restored session's attention and the file's.

    Each saved array's shape is compared with the restored session's before it is read."""
    ours = session_arrays(session)
    shape = arrays.shape if isinstance(arrays, SavedArrays) else (lambda name: arrays[name].shape)
    same_tokens = (  # the shape first: the ids are read only when they can be the session's
        "token_ids" in arrays and shape("token_ids") == ours["token_ids"].shape
        and np.array_equal(ours["token_ids"], arrays["token_ids"])
    )  # fmt: skip
    if not same_tokens:
        raise InputError("Replaying the saved tokens did not give the saved sequence: was it saved with another model?")
    names = [n for n in ours if "attention." in n]
    worst = 0.0
    for name in names:
        if name not in arrays or shape(name) != ours[name].shape:
            raise InputError(f"The saved session lacks {name}, or its shape differs: was it saved with another model?")
        worst = max(worst, float(np.abs(ours[name].astype(np.float32) - arrays[name].astype(np.float32)).max()))
    return worst


# ---------------------------------------------------------------- links
def query_string(snapshot: Snapshot) -> str:
    """``?model=…&text=…``: what a link needs to reopen the session (no arrays)."""
    params = {
        "model": snapshot.model, "text": snapshot.text, "chat": int(snapshot.chat), "cache": int(snapshot.use_cache),
        "temperature": snapshot.temperature, "top_k": snapshot.top_k, "top_p": snapshot.top_p, "seed": snapshot.seed,
        "tokens": ",".join(map(str, snapshot.generated)), "forced": ",".join(map(str, snapshot.forced)),
        "layer": snapshot.layer, "head": snapshot.head, "tab": snapshot.tab,
    }  # fmt: skip
    if snapshot.query is not None:
        params["query"] = snapshot.query
    if snapshot.cache_policy != "full":  # links to full-cache sessions stay as they were
        params["policy"] = snapshot.cache_policy
    query = "?" + urlencode(params)
    if len(query) > MAX_LINK_CHARS:
        raise InputError(
            f"A link to this session would be {len(query):,} characters long (at most {MAX_LINK_CHARS:,} travel "
            "safely); save the session as a file instead."
        )
    return query


def from_query(params: Mapping[str, str]) -> Snapshot | None:
    """The snapshot a link describes, or None when the URL carries none."""
    if "model" not in params and "text" not in params:
        return None
    if not params.get("model") or not params.get("text"):
        raise InputError("This link lacks a model or a text; it cannot reopen a session.")

    def ints(name: str) -> list[int]:
        raw = params.get(name, "")
        return [int(t) for t in raw.split(",") if t.strip()]

    try:
        query = params.get("query")
        raw = {
            "model": params["model"], "text": params["text"], "chat": params.get("chat") == "1",
            "use_cache": params.get("cache", "1") == "1", "temperature": float(params.get("temperature", 0)),
            "top_k": int(params.get("top_k", 0)), "top_p": float(params.get("top_p", 1)),
            "seed": int(params.get("seed", 0)), "generated": ints("tokens"), "forced": ints("forced"),
            "layer": int(params.get("layer", 0)), "head": params.get("head", "mean"),
            "query": int(query) if query not in (None, "") else None, "tab": params.get("tab", DEFAULT_TAB),
            "cache_policy": params.get("policy", "full"),
        }  # fmt: skip
    except ValueError as error:  # (int() of 5,000 digits too)
        raise InputError("This link's numbers are damaged; it cannot reopen the session.") from error
    return checked_snapshot(raw)  # the ranges, with the field named
