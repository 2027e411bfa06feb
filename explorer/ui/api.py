"""The app's web API: a few named endpoints for ``gradio_client`` and plain HTTP users.

    from gradio_client import Client
    client = Client("http://127.0.0.1:7860")
    first = client.predict("smollm2-135m-instruct", "The capital of France is", api_name="/step")
    nxt = client.predict("smollm2-135m-instruct", "The capital of France is", first["tokens"], api_name="/step")

Each call carries everything it builds on (the model, the text, the tokens generated so far) and
the server keeps nothing between calls: a client holds its own session as a list of token ids,
and any replica of the app can answer it. The page's own events are hidden from the API page
(they stay callable: the page uses them); these are the documented ones.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable

import gradio as gr

from explorer.admission import HEAVY_POSITIONS
from explorer.analysis.export import candidates
from explorer.analysis.snapshot import checked_snapshot, number_field, restore, shown
from explorer.errors import InputError
from explorer.loading.registry import TRANSLATOR_MODEL
from explorer.present import model_store
from explorer.present.views import MEAN, checked_view
from explorer.session import MAX_SESSION_POSITIONS, GenerationSession
from explorer.session.inputs import encode_input
from explorer.ui.heavy import heavy_if, heavy_job, long_text
from explorer.ui.tab import USER_ERRORS, log

MAX_API_NEW_TOKENS = 256  # per generate or translate call: a call holds a worker while it runs
# An /attention answer holds at most this many weights (query rows x keys): ~10 bytes each in JSON,
# so at most ~0.7 MB with the tokens. A longer text is asked for in ranges of query rows.
MAX_ATTENTION_WEIGHTS = 65_536
MAX_ANSWER_BYTES = 1_000_000  # the documented bound of any answer's JSON (docs/web-api.md)
_endpoint: contextvars.ContextVar[str] = contextvars.ContextVar("endpoint", default="api")


def answered(endpoint: Callable) -> Callable:
    """The endpoint with the explorer's own errors sent to the caller as their message."""

    @functools.wraps(endpoint)
    def call(*args, **kwargs):
        _endpoint.set(endpoint.__name__)
        try:
            return endpoint(*args, **kwargs)
        except USER_ERRORS as error:  # a refusal, not a bug: one line in the log, no traceback
            log.info("refused a call of /%s: %s", endpoint.__name__, error)
            raise gr.Error(str(error), print_exception=False) from error

    return call


def loaded_model(model: str):
    """A model the page could open (the registry, or what the operator allows), loaded once."""
    return model_store.get_model(model_store.resolve_custom(model), progress=False)


def session_for(model: str, text: str, tokens: list[int] | None, **settings) -> GenerationSession:
    """A session of ``text`` with ``tokens`` (generated ids) run through the model after it: a long
    one, or a model's first load, as the caller's heavy job (``explorer/ui/heavy.py``)."""
    name = model_store.resolve_custom(model)
    # Checked as a link's fields are: types and ranges, before any of it reaches the model.
    snap = checked_snapshot({"model": model, "text": text, "generated": tokens or [], **settings})
    heavy = long_text(snap.text) or len(snap.generated) > HEAVY_POSITIONS or not model_store.is_loaded(name)
    with heavy_if(heavy, f"/{current_endpoint()} over a long text"):
        return restore(loaded_model(model), snap)


def current_endpoint() -> str:
    return _endpoint.get()


# ---------------------------------------------------------------- the endpoints
def models() -> list[dict]:
    """The models this server offers (``--models``), and whether each can be loaded now (and if not, why)."""
    return [
        {
            "name": e.name,
            "kind": "translator" if e.is_encoder_decoder else "decoder-only",
            "available": e.available,
            "reason": e.reason,
            "description": e.description,
        }
        for e in model_store.offered_models()
    ]


def load_model(model: str) -> dict:
    """Load a model (once per server) and describe its architecture."""
    c = loaded_model(model).config
    return {
        "name": model_store.public_name(model), "kind": "translator" if c.is_encoder_decoder else "decoder-only",
        "layers": c.n_layers, "encoder_layers": c.n_encoder_layers, "heads": c.n_heads, "kv_heads": c.n_kv_heads,
        "head_dim": c.head_dim, "d_model": c.d_model, "vocab_size": c.vocab_size, "max_positions": c.max_positions,
    }  # fmt: skip


def step(model: str, text: str, tokens: list[int] | None = None, temperature: float = 0.0, top_k: int = 0,
         top_p: float = 1.0, seed: int = 0) -> dict:  # fmt: skip
    """One token after ``text`` and ``tokens`` (the generated ids so far; none to start): the
    token, the candidates it was chosen from, and ``tokens`` with it appended (pass that back)."""
    session = session_for(model, text, tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    result = session.step()
    return {
        "token_id": result.token_id, "token_text": result.token_text, "position": result.position,
        "top_k": candidates(result.top_k), "tokens": session.generated_ids,
        "text": session.generated_text(), "finished": session.finished, "elapsed_ms": result.elapsed_ms,
    }  # fmt: skip


def generate(model: str, text: str, max_new_tokens: int = 20, temperature: float = 0.0, top_k: int = 0,
             top_p: float = 1.0, seed: int = 0) -> dict:  # fmt: skip
    """Up to ``max_new_tokens`` tokens (at most 256 a call), stopping at the model's end token."""
    session = session_for(model, text, [], temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    count = number_field(1, MAX_API_NEW_TOKENS, whole=True)("max_new_tokens", max_new_tokens)
    for _ in range(count):
        if session.finished or len(session.token_ids) >= session.max_positions:
            break
        session.step()
    return {"tokens": session.generated_ids, "text": session.generated_text(), "finished": session.finished}


def attention(model: str, text: str, tokens: list[int] | None = None, layer: int = 0, head: str = MEAN,
              kind: str = "self", query_from: int = 0, query_to: int | None = None) -> dict:  # fmt: skip
    """One layer's attention for ``text`` and ``tokens``: one head (its index) or their average
    ("mean"); ``kind`` "self", or for a translator "cross" or "encoder". ``weights[q][k]`` is what
    query ``query_from + q`` gives key k; a causal row's future keys are 0. The query rows
    ``query_from`` .. ``query_to - 1`` (default: all) times the keys are at most
    ``MAX_ATTENTION_WEIGHTS``: a longer text is asked for in ranges of rows (refused before any work)."""
    if kind not in ("self", "cross", "encoder"):
        raise InputError(f"kind {shown(kind)} is not one of self, cross, encoder")
    n_queries, n_keys = attention_shape(model, text, tokens, kind)
    rows = query_rows(query_from, query_to, n_queries, n_keys)
    session = session_for(model, text, tokens)
    layer, head = checked_view(session, layer, head)
    by_kind = {
        "self": (session.self_attention, session.token_texts(), session.token_texts()),
        "cross": (session.cross_attention, session.token_texts(), session.source_texts()),
        "encoder": (session.encoder_attention, session.source_texts(), session.source_texts()),
    }
    of_layer, queries, keys = by_kind[kind]
    weights = of_layer(layer)[:, rows.start : rows.stop]  # (heads, rows, keys)
    chosen = weights.mean(axis=0) if head == MEAN else weights[int(head)]
    return {"kind": kind, "layer": layer, "head": head, "query_tokens": queries, "key_tokens": keys,
            "query_from": rows.start, "query_to": rows.stop, "weights": chosen.round(6).tolist()}  # fmt: skip


def attention_shape(model: str, text, tokens, kind: str) -> tuple[int, int]:
    """How many queries and keys ``kind``'s attention of ``text`` and ``tokens`` has, from the
    tokenizer alone (no pass: a refusal comes before the work)."""
    loaded = loaded_model(model) if model_store.is_loaded(model_store.resolve_custom(model)) else None
    if loaded is None:
        with heavy_job(f"Loading {shown(model)}"):
            loaded = loaded_model(model)
    source = len(encode_input(loaded, text, False, MAX_SESSION_POSITIONS))
    generated = len(tokens) if isinstance(tokens, list) else 0
    if not loaded.is_encoder_decoder:
        return source + generated, source + generated
    target = 1 + generated  # the decoder's start token, then the generated ones
    return {"self": (target, target), "cross": (target, source), "encoder": (source, source)}[kind]


def query_rows(query_from, query_to, n_queries: int, n_keys: int) -> range:
    """The query rows asked for, checked: whole numbers within the text, and at most
    ``MAX_ATTENTION_WEIGHTS`` weights with the keys; else a refusal that says what to ask for."""
    first = number_field(0, max(n_queries - 1, 0), whole=True)("query_from", query_from)
    end = n_queries if query_to is None else number_field(first + 1, n_queries, whole=True)("query_to", query_to)
    most = max(1, MAX_ATTENTION_WEIGHTS // max(n_keys, 1))
    if (end - first) * n_keys > MAX_ATTENTION_WEIGHTS:
        raise InputError(
            f"{end - first:,} query rows over {n_keys:,} keys are {(end - first) * n_keys:,} weights; an answer "
            f"holds at most {MAX_ATTENTION_WEIGHTS:,}. Ask for at most {most:,} rows at a time "
            f"(query_from={first}, query_to={min(first + most, n_queries)}), or send a shorter text."
        )
    return range(first, end)


def translate(text: str, model: str = TRANSLATOR_MODEL, max_new_tokens: int = 64) -> str:
    """The translation of ``text`` by a translator (greedy), as text."""
    if not loaded_model(model).is_encoder_decoder:
        raise InputError(f"{shown(model)} is not a translator; use /generate for a decoder-only model")
    return generate(model, text, max_new_tokens)["text"]


ENDPOINTS = (models, load_model, step, generate, attention, translate)


def register() -> None:
    """Add the named endpoints to the Blocks being built (call inside its ``with``)."""
    for endpoint in ENDPOINTS:
        gr.api(answered(endpoint), api_name=endpoint.__name__)


def hide_page_events(demo: gr.Blocks) -> None:
    """Keep the page's own events (named after internal callbacks: on_step, on_tab_3, ...) off the
    API page; they stay callable, as the page itself calls them."""
    for dependency in demo.fns.values():
        dependency.api_visibility = "undocumented"
