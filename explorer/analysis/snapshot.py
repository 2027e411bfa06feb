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
import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from urllib.parse import urlencode

import numpy as np

from explorer.loading import LoadedModel
from explorer.session import GenerationSession, InputError

FORMAT = "decoder-explorer-session"
VERSION = 1
MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_LINK_CHARS = 8000  # longer URLs are cut by some servers and chat apps
TABS = (
    "self", "cross", "layers", "cache", "lens", "roles", "ablation", "patching", "attribution", "compare", "proof",
    "architecture",
)  # fmt: skip


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
    tab: str = "self"


def snapshot_of(model_name: str, session: GenerationSession, **view) -> Snapshot:
    forced = [s.position - session.prompt_length for s in session.steps if s.forced]
    s = session.sampling
    return Snapshot(
        model=model_name, text=session.text, chat=session.chat, use_cache=session.use_cache,
        temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, seed=s.seed,
        generated=list(session.generated_ids), forced=forced, **view,
    )  # fmt: skip


def restore(loaded: LoadedModel, snapshot: Snapshot) -> GenerationSession:
    """A live session with the snapshot's input, settings and tokens, each run through the model."""
    session = GenerationSession(
        loaded, snapshot.text, use_cache=snapshot.use_cache, chat=snapshot.chat and loaded.has_chat_template,
        temperature=snapshot.temperature, top_k=snapshot.top_k, top_p=snapshot.top_p, seed=snapshot.seed,
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


def read_bytes(data: bytes) -> tuple[Snapshot, dict[str, np.ndarray]]:
    """The snapshot and arrays of a saved session; a clear InputError for anything else."""
    not_ours = "This file is not a session saved by Decoder Explorer (save one with “Save session”)."
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"The file is larger than {MAX_FILE_BYTES // 2**20} MB; it is not a saved session.")
    try:
        loaded = np.load(io.BytesIO(data), allow_pickle=False)  # never unpickles: no code runs
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ValueError("a single array, not an archive")
        with loaded as npz:
            arrays = {name: npz[name] for name in npz.files}
        description = json.loads(arrays.pop("description").tobytes().decode("utf-8"))
    except (ValueError, KeyError, OSError, UnicodeDecodeError, EOFError, zipfile.BadZipFile) as error:
        raise InputError(not_ours) from error
    if not isinstance(description, dict) or description.get("format") != FORMAT:
        raise InputError(not_ours)
    if description.get("version") != VERSION:
        raise InputError(f"This session file has version {description.get('version')}; this explorer reads {VERSION}.")
    return checked_snapshot(description.get("snapshot")), arrays


def checked_snapshot(raw) -> Snapshot:
    """A Snapshot from untrusted JSON: every field of the right type, or an InputError."""
    if not isinstance(raw, dict):
        raise InputError("The saved session has no description.")
    fields = Snapshot.__dataclass_fields__
    unknown = set(raw) - set(fields)
    if unknown or "model" not in raw or "text" not in raw:
        raise InputError("The saved session's description is damaged.")
    try:
        snapshot = Snapshot(**raw)
        snapshot.generated = [int(t) for t in snapshot.generated]
        snapshot.forced = [int(t) for t in snapshot.forced]
        if not isinstance(snapshot.model, str) or not isinstance(snapshot.text, str):
            raise TypeError
    except (TypeError, ValueError) as error:
        raise InputError("The saved session's description is damaged.") from error
    if snapshot.tab not in TABS:
        snapshot.tab = "self"
    return snapshot


def attention_difference(session: GenerationSession, arrays: dict[str, np.ndarray]) -> float:
    """The largest difference between the restored session's attention and the file's."""
    ours = session_arrays(session)
    if not np.array_equal(ours["token_ids"], arrays.get("token_ids")):
        raise InputError("Replaying the saved tokens did not give the saved sequence: was it saved with another model?")
    names = [n for n in ours if "attention." in n]
    worst = 0.0
    for name in names:
        if name not in arrays or arrays[name].shape != ours[name].shape:
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
        return checked_snapshot({
            "model": params["model"], "text": params["text"], "chat": params.get("chat") == "1",
            "use_cache": params.get("cache", "1") == "1", "temperature": float(params.get("temperature", 0)),
            "top_k": int(params.get("top_k", 0)), "top_p": float(params.get("top_p", 1)),
            "seed": int(params.get("seed", 0)), "generated": ints("tokens"), "forced": ints("forced"),
            "layer": int(params.get("layer", 0)), "head": params.get("head", "mean"),
            "query": int(query) if query not in (None, "") else None, "tab": params.get("tab", "self"),
        })  # fmt: skip
    except ValueError as error:
        raise InputError("This link's numbers are damaged; it cannot reopen the session.") from error
