"""Which earlier heads a head composes with, over the whole text (Elhage et al. 2021's Q-, K- and
V-composition, measured on the session's tokens rather than on the weights alone).

For head h of layer l, with α_ij its attention weights, q_i and k_j its queries and keys as
sums of the stream's components (qk.py) and ``scale`` its score scale:

* **K-composition** of component e: the share of the key side it makes, weighted by where the
  head looks: Σ_ij α_ij |scale · q_i · k_e(j)| / Σ_c Σ_ij α_ij |scale · q_i · k_c(j)|;
* **Q-composition**: the same on the query side, |scale · q_e(i) · k_j|;
* **V-composition**: the share of the head's output that comes through e's part of the values:
  Σ_i ‖Σ_j α_ij v_e(j) W_O,h‖ / Σ_c Σ_i ‖Σ_j α_ij v_c(j) W_O,h‖, with v_e(j) = W_V n_e(j).

Each kind sums to 1 over the components (the embedding, the MLPs and the biases are among them);
``heads`` lists the earlier heads only, strongest first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from explorer.session import GenerationSession

from .qk import _projected, attention_module, streams
from .traced import check_head, traced

HEAD = re.compile(r"^(enc\.)?L(\d+)\.(cross\.)?H(\d+)$")


def decoder_head(name: str) -> tuple[int, int] | None:
    """(layer, head) for a component named after a decoder self-attention head ("L16.H0"), else None."""
    match = HEAD.match(name)
    if match is None or match.group(1) or match.group(3):
        return None
    return int(match.group(2)), int(match.group(4))


@dataclass
class Composition:
    layer: int
    head: int
    attention: str
    k: dict[str, float]  # key-side component -> its share
    q: dict[str, float]
    v: dict[str, float]

    def heads(self, kind: str, n: int = 5) -> list[tuple[str, float]]:
        """The ``n`` earlier heads with the largest share of ``kind`` ("k", "q" or "v")."""
        shares = getattr(self, kind)
        return sorted(((name, s) for name, s in shares.items() if HEAD.match(name)), key=lambda x: -x[1])[:n]

    def summary(self) -> str:
        def listed(kind: str) -> str:
            return ", ".join(f"{name} ({share:.0%})" for name, share in self.heads(kind, 3)) or "none"

        return (
            f"Layer {self.layer} head {self.head}: keys made mostly by {listed('k')}; queries by {listed('q')}; "
            f"values by {listed('v')}."
        )


def _shares(names: list[str], amounts: torch.Tensor) -> dict[str, float]:
    total = float(amounts.sum())
    return {name: float(a) / total if total > 0 else 0.0 for name, a in zip(names, amounts.tolist(), strict=True)}


def _values_by_part(attn, stream, kv_head: int, head: int, weights: torch.Tensor) -> tuple[list[str], torch.Tensor]:
    """(names, (C,)) Σ_i ‖Σ_j α_ij v_c(j) W_O,h‖ for each part c of the value side (its bias one more)."""
    hd = attn.head_dim
    parts = stream.project(attn.v_proj.weight.view(-1, hd, attn.v_proj.weight.shape[-1])[kv_head])  # (C, K, hd)
    names = list(stream.names)
    if attn.v_proj.bias is not None:
        parts = torch.cat([parts, attn.v_proj.bias.view(-1, hd)[kv_head].expand(1, *parts.shape[1:])])
        names.append("v bias")
    mixed = torch.einsum("ij,cje->cie", weights, parts)  # (C, Q, hd)
    w_o = attn.o_proj.weight.view(-1, attn.n_heads, hd)[:, head]  # (d_model, hd)
    return names, (mixed @ w_o.T).norm(dim=-1).sum(-1)


@torch.inference_mode()
def composition(session: GenerationSession, layer: int, head: int, attention: str = "self") -> Composition:
    """K-, Q- and V-composition of head ``head`` of layer ``layer`` with every component before it, over
    the session's whole text (the module's docstring says how each is measured)."""
    check_head(session, layer, head)
    n = len(session.token_ids)
    queries = list(range(n))
    keys = list(range(len(session.source_ids))) if attention == "cross" else queries
    attn = attention_module(session, layer, attention)
    kv_head = head // session.config.queries_per_kv_head
    q_stream, k_stream, rotary = streams(session, layer, queries, keys, attention)
    q_side = _projected(attn, q_stream, "q", head, rotary)  # (Cq, Q, hd)
    k_side = _projected(attn, k_stream, "k", kv_head, rotary)  # (Ck, K, hd)
    stack = "cross_attn" if attention == "cross" else "self_attn"
    weights = traced(session).decoder[f"decoder.{layer}.{stack}.probs"][0, head]  # (Q, K)
    by_key = attn.scale * torch.einsum("ie,cje->cij", q_side.parts.sum(0), k_side.parts)  # (Ck, Q, K)
    by_query = attn.scale * torch.einsum("cie,je->cij", q_side.parts, k_side.parts.sum(0))  # (Cq, Q, K)
    v_names, v_amounts = _values_by_part(attn, k_stream, kv_head, head, weights)
    return Composition(
        layer, head, attention,
        _shares(k_side.names, (weights * by_key.abs()).sum((1, 2))),
        _shares(q_side.names, (weights * by_query.abs()).sum((1, 2))),
        _shares(v_names, v_amounts),
    )  # fmt: skip
