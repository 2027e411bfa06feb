"""Why a head looks where it looks: the pre-softmax score split over the residual stream's components.

A head's score of query i on key j is scale · q_i · k_j (+ T5's relative bias). With every norm's
scale held at its value, q_i is a sum over the components c of the stream at i (stream.py):
q_i = Σ_c R_i N_q(W_Q n_c(i)) + R_i N_q(b_Q), where n_c is the component through the sublayer's
norm, N_q the head's q-norm (Qwen3, Gemma 3) with its scale held, R_i the rotary rotation at i;
likewise k_j. So the score is Σ_{c,c'} scale · q_c(i) · k_c'(j): the pair matrix (query
components × key components) sums to it. The projection biases are components of their own
(``q bias``, ``k bias``); T5's relative bias is the pair (``relative``, ``relative``).
For cross-attention the key side is the encoder memory's components (``enc.embed``, ``enc.L0.H1``...).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from explorer.model.positions import rotate
from explorer.session import GenerationSession
from explorer.tokens import visible

from .stream import Stream, fixed_norm, walk
from .traced import check_cell, check_head, traced

RELATIVE = "relative"


@dataclass
class Side:
    """One side's parts of a head's queries or keys: ``parts[c]`` (P, hd) is named ``names[c]``."""

    names: list[str]
    parts: torch.Tensor  # (C, P, head_dim), rotated
    positions: list[int]

    def at(self, position: int) -> torch.Tensor:
        return self.parts[:, self.positions.index(position)]  # (C, head_dim)


def _projected(attn: nn.Module, stream: Stream, which: str, head: int, rotary) -> Side:
    """The stream's parts through W_Q (or W_K) of ``head``, its bias as one more part, the q/k norm
    with its scale held, rotary at each position: (C, P, head_dim)."""
    hd = attn.head_dim
    proj = attn.q_proj if which == "q" else attn.k_proj
    weight = proj.weight.view(-1, hd, proj.weight.shape[-1])[head]  # (hd, d_model)
    parts, names = stream.project(weight), list(stream.names)  # (C, P, hd)
    if proj.bias is not None:
        parts = torch.cat([parts, proj.bias.view(-1, hd)[head].expand(1, *parts.shape[1:])])
        names.append(f"{which} bias")
    parts, _ = fixed_norm(attn.q_norm if which == "q" else attn.k_norm, parts)  # RMSNorm: no bias
    if rotary is not None:
        cos, sin = rotary
        parts = rotate(parts, (cos[stream.positions], sin[stream.positions]))
    return Side(names, parts, stream.positions)


def _sublayer_input(model, layer: int, attention: str, stream: Stream) -> Stream:
    """The stream as the sublayer reads it: through its pre-norm (a post-norm model reads it as it is)."""
    block = model.decoder.layers[layer]
    norm = block.self_attn_norm if attention == "self" else block.cross_attn_norm
    return stream.normed(norm) if block.norm_first or block.parallel_residual else stream


def streams(
    session: GenerationSession, layer: int, query_positions: list[int], key_positions: list[int], attention: str
):
    """(query-side stream, key-side stream, rotary angles or None) as the sublayer reads them."""
    model, kept = session.model, traced(session)
    if attention == "self":
        positions = sorted({*query_positions, *key_positions})
        stream = _sublayer_input(model, layer, "self", walk(model, kept.decoder, positions, (layer, "self")))
        return stream, stream, model.decoder.rotary_angles(torch.arange(max(positions) + 1))[layer]
    stream = _sublayer_input(model, layer, "cross", walk(model, kept.decoder, query_positions, (layer, "cross")))
    return stream, walk(model, kept.encoder, sorted(set(key_positions)), stack="encoder"), None


def attention_module(session: GenerationSession, layer: int, attention: str) -> nn.Module:
    block = session.model.decoder.layers[layer]
    return block.cross_attn if attention == "cross" else block.self_attn


def sides(session: GenerationSession, layer: int, head: int, query: int, keys: list[int], attention: str):
    """(query side at ``query``, key side at ``keys``) of one head."""
    attn = attention_module(session, layer, attention)
    kv_head = head // session.config.queries_per_kv_head
    q_stream, k_stream, rotary = streams(session, layer, [query], keys, attention)
    return _projected(attn, q_stream, "q", head, rotary), _projected(attn, k_stream, "k", kv_head, rotary)


@dataclass
class WhyAttends:
    """A cell's pre-softmax score, split: ``pairs[a, b]`` is query component a meeting key component b."""

    layer: int
    head: int
    query: int
    key: int
    attention: str  # "self" or "cross"
    score: float  # the model's own pre-softmax score
    query_names: list[str]
    key_names: list[str]
    pairs: np.ndarray  # (query components, key components), sums to ``score``
    query_token: str
    key_token: str

    @property
    def query_components(self) -> dict[str, float]:
        """Each query-side component's share of the score (its row of ``pairs``, summed)."""
        return dict(zip(self.query_names, self.pairs.sum(1).tolist(), strict=True))

    @property
    def key_components(self) -> dict[str, float]:
        """Each key-side component's share of the score (its column of ``pairs``, summed)."""
        return dict(zip(self.key_names, self.pairs.sum(0).tolist(), strict=True))

    @staticmethod
    def largest(components: dict[str, float], n: int = 8) -> list[tuple[str, float]]:
        return sorted(components.items(), key=lambda item: -abs(item[1]))[:n]

    def top_pair(self) -> tuple[str, str, float]:
        a, b = np.unravel_index(np.abs(self.pairs).argmax(), self.pairs.shape)
        return self.query_names[a], self.key_names[b], float(self.pairs[a, b])

    def summary(self) -> str:
        (k_name, k_value), (q_name, q_value) = (
            self.largest(self.key_components, 1)[0],
            self.largest(self.query_components, 1)[0],
        )
        a, b, value = self.top_pair()

        def does(value: float) -> str:  # the largest part by size: it may pull the score down
            return "adds most" if value >= 0 else "takes most away"

        return (
            f"Layer {self.layer} head {self.head} scores {visible(self.query_token)!r} → {visible(self.key_token)!r} "
            f"at {self.score:.2f}: on the key side {k_name} {does(k_value)} ({k_value:+.2f}), on the query side "
            f"{q_name} {does(q_value)} ({q_value:+.2f}); the largest pair is {a} (query) meeting {b} (key), "
            f"{value:+.2f}."
        )


def _relative_bias(session: GenerationSession, head: int, query: int, keys: list[int]) -> torch.Tensor | None:
    relative = session.model.decoder.relative
    if relative is None:
        return None
    return relative(torch.tensor([query]), max(keys) + 1)[0, head, 0, keys]  # (K,)


@torch.inference_mode()
def why_row(
    session: GenerationSession, layer: int, head: int, query: int, keys: list[int], attention: str = "self"
) -> list[WhyAttends]:
    """``why_attends`` for several keys of one query row at once (one walk of the stream)."""
    check_head(session, layer, head)
    for key in keys:
        check_cell(session, layer, query, key, attention)
    q_side, k_side = sides(session, layer, head, query, keys, attention)
    scale = session.model.decoder.layers[layer].self_attn.scale  # the family's (cross-attention's is the same)
    q = q_side.at(query)  # (Cq, hd)
    k = torch.stack([k_side.at(key) for key in keys])  # (K, Ck, hd)
    pairs = scale * torch.einsum("ae,kbe->kab", q, k)  # (K, Cq, Ck)
    q_names, k_names = list(q_side.names), list(k_side.names)
    bias = _relative_bias(session, head, query, keys) if attention == "self" else None
    if bias is not None:  # T5: its own pair, one more row and column
        pairs = torch.nn.functional.pad(pairs, (0, 1, 0, 1))
        pairs[:, -1, -1] = bias
        q_names, k_names = [*q_names, RELATIVE], [*k_names, RELATIVE]
    stack = "cross_attn" if attention == "cross" else "self_attn"
    scores = traced(session).decoder[f"decoder.{layer}.{stack}.scores"][0, head, query]  # (keys,)
    texts = session.token_texts()
    key_texts = session.source_texts() if attention == "cross" else texts
    return [
        WhyAttends(
            layer,
            head,
            query,
            key,
            attention,
            float(scores[key]),
            q_names,
            k_names,
            pairs[n].double().numpy(),
            texts[query],
            key_texts[key],
        )
        for n, key in enumerate(keys)
    ]


def why_attends(
    session: GenerationSession, layer: int, head: int, query: int, key: int, attention: str = "self"
) -> WhyAttends:
    """Why head ``head`` of layer ``layer`` scores query position ``query`` on key ``key`` as it does:
    its pre-softmax ``.score`` split into ``.pairs`` (query components × key components, summing to
    the score), ``.query_components`` and ``.key_components`` (name -> share of the score).
    ``attention="cross"``: a translator's cross-attention, ``key`` a source position."""
    return why_row(session, layer, head, query, [key], attention)[0]
