"""A session as data to analyse elsewhere: tokens, each step's candidates and timing, and attention.

``session_record`` is one JSON-ready dict; ``to_json`` writes it, and ``export_html`` builds a
page around the same attention. A saved session (``snapshot``) is for reopening in the
explorer; this is for reading in other tools, so it is plain JSON with the tokens as text.

Attention is T x T per head and layer: a 1,024-token SmolLM2 session holds 283 million weights.
The export keeps as much as fits ``max_cells`` weights per kind of attention, in this order:
every head and their average; the average only; the average for the last queries only. The
record says which (``detail``, ``first_query``), so nothing is cut silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from explorer.session import GenerationSession

FORMAT = "decoder-explorer-export"
VERSION = 1
MAX_CELLS = 4_000_000  # weights per kind of attention: ~24 MB of JSON, or ~21 MB in the HTML page
MEAN = "mean"


@dataclass
class AttentionExport:
    """One kind of attention (self, cross, encoder) at the detail that fits."""

    kind: str  # "self", "cross" or "encoder"
    title: str  # what it is, as the figures say it
    causal: bool
    query_tokens: list[str]
    key_tokens: list[str]
    choices: list[str]  # the second axis of ``weights``: "mean", then head indices as text
    first_query: int  # ``weights`` holds the queries from here to the last
    weights: np.ndarray  # (layers, choices, queries, keys), float32
    windows: list[int | None] | None = None  # each layer's sliding window (causal only), else None

    def window(self, layer: int) -> int | None:
        return self.windows[layer] if self.windows else None

    @property
    def detail(self) -> str:
        heads = "every head and their average" if len(self.choices) > 1 else "the average of the heads"
        rows = f", queries {self.first_query} to {len(self.query_tokens) - 1}" if self.first_query else ""
        return heads + rows

    def as_json(self) -> dict:
        """Weights as nested lists [layer][choice][query][key], rounded to 5 decimals; a causal row
        lists only the keys it may read (query i: keys 0 to i)."""
        layers = []
        for layer in self.weights:
            choices = []
            for matrix in np.round(layer.astype(np.float64), 5):
                rows = matrix.tolist()
                if self.causal:
                    rows = [row[: self.first_query + i + 1] for i, row in enumerate(rows)]
                choices.append(rows)
            layers.append(choices)
        return {
            "title": self.title, "causal": self.causal, "detail": self.detail, "choices": self.choices,
            "first_query": self.first_query, "query_tokens": self.query_tokens, "key_tokens": self.key_tokens,
            "weights": layers,
        }  # fmt: skip


def fitted(
    kind: str, title: str, layers: list[np.ndarray], query_tokens, key_tokens, *, causal: bool, max_cells: int,
    windows: list[int | None] | None = None,
):  # fmt: skip
    """``layers`` (each (heads, Q, K)) at the most detail that fits ``max_cells`` weights."""
    n_layers, (n_heads, n_q, n_k) = len(layers), layers[0].shape
    every_head = n_layers * (n_heads + 1) * n_q * n_k <= max_cells
    choices = [MEAN] + [str(h) for h in range(n_heads)] if every_head else [MEAN]
    rows = n_q if every_head else max(1, min(n_q, max_cells // max(1, n_layers * n_k)))
    first = n_q - rows
    stacked = np.empty((n_layers, len(choices), rows, n_k), dtype=np.float32)
    for i, attention in enumerate(layers):
        stacked[i, 0] = attention[:, first:].mean(axis=0)
        if every_head:
            stacked[i, 1:] = attention
    return AttentionExport(
        kind, title, causal, list(query_tokens), list(key_tokens), choices, first, stacked, windows
    )  # fmt: skip


def attention_exports(session: GenerationSession, max_cells: int = MAX_CELLS) -> list[AttentionExport]:
    """The session's self-attention, and a translator's cross- and encoder attention."""
    c = session.config
    tokens, source = session.token_texts(), session.source_texts()
    what = "Decoder self-attention" if session.is_encoder_decoder else "Causal self-attention"
    self_layers = [session.self_attention(i) for i in range(c.n_layers)]
    windows = [c.window_of(i) for i in range(c.n_layers)]
    exports = [fitted("self", what, self_layers, tokens, tokens, causal=True, max_cells=max_cells, windows=windows)]
    if session.is_encoder_decoder:
        cross = [session.cross_attention(i) for i in range(c.n_layers)]
        encoder = [session.encoder_attention(i) for i in range(c.n_encoder_layers)]
        exports.append(fitted("cross", "Cross-attention", cross, tokens, source, causal=False, max_cells=max_cells))
        exports.append(
            fitted("encoder", "Encoder self-attention", encoder, source, source, causal=False, max_cells=max_cells)
        )
    return exports


def candidates(top_k) -> list[dict]:
    return [{"id": t.token_id, "text": t.text, "probability": round(t.probability, 6)} for t in top_k]


def token_rows(session: GenerationSession) -> list[dict]:
    """One row per token: position, id, text, and where it came from."""
    columns = zip(session.token_ids, session.token_texts(), session.token_kinds(), strict=True)
    return [{"position": p, "id": i, "text": t, "kind": k} for p, (i, t, k) in enumerate(columns)]


def step_rows(session: GenerationSession, with_top_k: bool = True) -> list[dict]:
    """One row per generated token: what was chosen, how, how long its pass took, and (with
    ``with_top_k``) the candidates it was chosen from."""
    rows = []
    for step in session.steps:
        row = {
            "position": step.position, "token_id": step.token_id, "token_text": step.token_text,
            "forced": step.forced, "elapsed_ms": round(step.elapsed_ms, 3), "use_cache": step.use_cache,
            "cache_bytes": step.cache_bytes,
        }  # fmt: skip
        rows.append(row | {"top_k": candidates(step.top_k)} if with_top_k else row)
    return rows


def top_k_rows(session: GenerationSession) -> list[dict]:
    """One row per candidate of every step: the distribution each token was chosen from."""
    return [
        {
            "position": step.position,
            "rank": rank,
            "id": t.token_id,
            "text": t.text,
            "probability": t.probability,
            "chosen": t.token_id == step.token_id,
        }
        for step in session.steps
        for rank, t in enumerate(step.top_k)
    ]


def session_record(model_name: str, session: GenerationSession, max_cells: int = MAX_CELLS) -> dict:
    """Everything the explorer showed of this session, as JSON-ready data."""
    s = session.sampling
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": model_name,
        "kind": "translator" if session.is_encoder_decoder else "decoder-only",
        "text": session.text,
        "settings": {
            "chat": session.chat,
            "use_cache": session.use_cache,
            "temperature": s.temperature,
            "top_k": s.top_k,
            "top_p": s.top_p,
            "seed": s.seed,
        },
        "source_tokens": [
            {"id": i, "text": t} for i, t in zip(session.source_ids, session.source_texts(), strict=True)
        ],
        "tokens": token_rows(session),
        "prefill_ms": round(session.prefill_ms, 3),
        "steps": step_rows(session),
        "next_top_k": [] if session.finished else candidates(session.top_candidates()),
        "attention": {a.kind: a.as_json() for a in attention_exports(session, max_cells)},
    }


def to_json(model_name: str, session: GenerationSession, max_cells: int = MAX_CELLS) -> str:
    return json.dumps(session_record(model_name, session, max_cells), ensure_ascii=False, separators=(",", ":"))
