"""The one traced pass the circuits read, kept per session until its tokens change."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch

from explorer.errors import InputError
from explorer.model import Record
from explorer.model.trace import Trace
from explorer.session import GenerationSession

KINDS = frozenset({"heads", "scores", "attention"})  # each head's z, the scores and the weights, every layer


def _record(n_layers: int, stack: str) -> Record:
    """What the decomposition reads: the embedding, each head's z, each feed-forward's output,
    each attention's scores, weights and values."""
    names = {f"{stack}.embed"}
    for i in range(n_layers):
        names |= {f"{stack}.{i}.ffn.out", f"{stack}.{i}.self_attn.v", f"{stack}.{i}.cross_attn.v"}
    return Record(KINDS, frozenset(names))


@dataclass
class Traced:
    """A session's tokens through the model once (no cache), and a translator's source through its encoder."""

    key: tuple
    decoder: Trace
    encoder: Trace | None


_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@torch.inference_mode()
def traced(session: GenerationSession) -> Traced:
    """The session's traced pass, run once for its current tokens (stepping or undoing runs it again)."""
    key = (tuple(session.token_ids), tuple(session.source_ids))
    kept = _KEPT.get(session)
    if kept is not None and kept.key == key:
        return kept
    config = session.config
    decoder = session.full_pass(_record(config.n_layers, "decoder")).trace
    encoder = None
    if session.is_encoder_decoder:
        record = _record(config.n_encoder_layers, "encoder")
        _, encoder = session.model.encode(session.ids_tensor(session.source_ids), record, session.interventions)
    kept = Traced(key, decoder, encoder)
    _KEPT[session] = kept
    return kept


def check_head(session: GenerationSession, layer: int, head: int) -> None:
    config = session.config
    if not 0 <= layer < config.n_layers:
        raise InputError(f"layer {layer} does not exist; choose 0 to {config.n_layers - 1}")
    if not 0 <= head < config.n_heads:
        raise InputError(f"head {head} does not exist; choose 0 to {config.n_heads - 1}")


def check_cell(session: GenerationSession, layer: int, query: int, key: int, attention: str) -> None:
    """Refuse a cell the head cannot read (the future, past a sliding window, outside the source)."""
    n = len(session.token_ids)
    if not 0 <= query < n:
        raise InputError(f"query position {query} does not exist; choose 0 to {n - 1}")
    if attention == "cross":
        if not session.is_encoder_decoder:
            raise InputError("this model has no cross-attention: it is not a translator")
        if not 0 <= key < len(session.source_ids):
            raise InputError(f"source position {key} does not exist; choose 0 to {len(session.source_ids) - 1}")
        return
    if attention != "self":
        raise InputError(f"attention is 'self' or 'cross', not {attention!r}")
    window = session.config.window_of(layer)
    first = 0 if window is None else max(0, query - window + 1)
    if not first <= key <= query:
        raise InputError(f"query {query} of layer {layer} reads keys {first} to {query} only, not {key}")
