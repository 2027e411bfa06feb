"""What a head carries: its output at a query as a sum over keys, and each key's direct logit effect.

Head h's output at query i is Σ_j α_ij · v_j W_O,h (v_j the key's value of the head's key/value
group, W_O,h the head's slice of the output projection): each term is what key j sent. Its norm,
‖α_ij v_j W_O,h‖ = α_ij ‖v_j W_O,h‖, is "weight × what is carried" (Kobayashi et al. 2020). The
direct effect on a token's logit is each term through every later norm with its scale held at
its value (a post-norm model's later layers, the final norm) and the unembedding row of the
token (times T5's output scale): the terms sum to the head's direct effect, its own component of
the final stream read by the unembedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from explorer.errors import InputError
from explorer.session import GenerationSession
from explorer.tokens import visible

from .stream import walk
from .traced import check_cell, check_head, traced


def _values_out(session: GenerationSession, layer: int, head: int, attention: str) -> torch.Tensor:
    """(keys, d_model): each key's value of ``head`` through its slice of W_O."""
    block = session.model.decoder.layers[layer]
    attn = block.cross_attn if attention == "cross" else block.self_attn
    stack = "cross_attn" if attention == "cross" else "self_attn"
    values = traced(session).decoder[f"decoder.{layer}.{stack}.v"][0, head // session.config.queries_per_kv_head]
    w_o = attn.o_proj.weight.view(-1, attn.n_heads, attn.head_dim)[:, head]  # (d_model, hd)
    return values @ w_o.T  # (keys, d_model)


def _weights(session: GenerationSession, layer: int, head: int, attention: str) -> torch.Tensor:
    stack = "cross_attn" if attention == "cross" else "self_attn"
    return traced(session).decoder[f"decoder.{layer}.{stack}.probs"][0, head]  # (queries, keys)


@torch.inference_mode()
def carried_norms(session: GenerationSession, layer: int, head: int, attention: str = "self") -> np.ndarray:
    """(queries, keys) ‖α_ij v_j W_O,h‖, the heatmap's "weight × what is carried"."""
    check_head(session, layer, head)
    norms = _values_out(session, layer, head, attention).norm(dim=-1)  # (keys,)
    return (_weights(session, layer, head, attention) * norms).double().numpy()


def _token(session: GenerationSession, query: int, token: int | None) -> int:
    """The token whose logit is read: given, or the one at the next position, or the model's favourite."""
    if token is None:
        last = query + 1 == len(session.token_ids)
        return int(session.next_logits().argmax()) if last else session.token_ids[query + 1]
    if not 0 <= token < session.config.vocab_size:
        raise InputError(f"token id {token} is not in the vocabulary (0 to {session.config.vocab_size - 1})")
    return token


@dataclass
class Carried:
    """What head ``head`` of layer ``layer`` sent to ``query`` from each key."""

    layer: int
    head: int
    query: int
    attention: str
    keys: list[int]
    key_tokens: list[str]
    weights: np.ndarray  # (K,) α_ij
    vectors: np.ndarray  # (K, d_model) α_ij v_j W_O,h: they sum to ``output``
    output: np.ndarray  # (d_model,) the head's output at the query, z_i W_O,h (the model's own)
    token_id: int
    token: str
    logit_effects: np.ndarray  # (K,) each key's direct effect on the token's logit
    direct_effect: float  # the head's own direct effect on it (its final-stream component, unembedded)

    @property
    def norms(self) -> np.ndarray:
        return np.linalg.norm(self.vectors, axis=-1)  # (K,)

    def summary(self) -> str:
        top = int(np.abs(self.logit_effects).argmax())
        heaviest = int(self.norms.argmax())
        return (
            f"Layer {self.layer} head {self.head} at position {self.query} carries most from "
            f"{visible(self.key_tokens[heaviest])!r} (weight {self.weights[heaviest]:.2f}, size "
            f"{self.norms[heaviest]:.2f}); its direct effect on {visible(self.token)!r} is {self.direct_effect:+.3f}, "
            f"{self.logit_effects[top]:+.3f} of it from {visible(self.key_tokens[top])!r}."
        )


def _direct(session: GenerationSession, query: int, split=None) -> tuple[list[str], torch.Tensor]:
    """The final stream's components at ``query`` (after the final norm, scale held): names, (C, d)."""
    stream = walk(session.model, traced(session).decoder, [query], None, split=split)
    return stream.names, stream.parts[:, 0] * session.config.output_scale


@torch.inference_mode()
def what_it_carries(
    session: GenerationSession, layer: int, head: int, query: int, token: int | None = None, attention: str = "self"
) -> Carried:
    """Each key's contribution α_ij · v_j W_O,h to head ``head``'s output at ``query`` (grouped-query
    heads read their group's values), its norm, and its direct effect on the logit of ``token``
    (by default the token at the next position, or the model's favourite after the last)."""
    check_head(session, layer, head)
    check_cell(session, layer, query, 0 if attention == "cross" else query, attention)
    weights = _weights(session, layer, head, attention)[query]  # (keys,)
    n_keys = weights.shape[0] if attention == "cross" else query + 1
    keys = [j for j in range(n_keys) if weights[j] > 0]  # masked keys (the future, past a window) send nothing
    vectors = weights[keys, None] * _values_out(session, layer, head, attention)[keys]  # (K, d_model)
    name = f"L{layer}.cross.H{head}" if attention == "cross" else f"L{layer}.H{head}"

    def split(part: str, output: torch.Tensor):  # the head's part (1, d) becomes one part per key
        if part != name:
            return [part], output[None]
        return [f"key {j}" for j in keys], vectors[:, None]

    names, parts = _direct(session, query, split)
    head_names, head_parts = _direct(session, query)
    unembed = session.model.lm_head.weight  # (vocab, d_model)
    token_id = _token(session, query, token)
    effects = parts[[names.index(f"key {j}") for j in keys]] @ unembed[token_id]  # (K,)
    z = traced(session).decoder[f"decoder.{layer}.{'cross_attn' if attention == 'cross' else 'self_attn'}.z"]
    block = session.model.decoder.layers[layer]
    attn = block.cross_attn if attention == "cross" else block.self_attn
    w_o = attn.o_proj.weight.view(-1, attn.n_heads, attn.head_dim)[:, head]  # (d_model, hd)
    key_texts = session.source_texts() if attention == "cross" else session.token_texts()
    return Carried(
        layer, head, query, attention, keys, [key_texts[j] for j in keys],
        weights[keys].double().numpy(), vectors.double().numpy(), (z[0, head, query] @ w_o.T).double().numpy(),
        token_id, session.tokenizer.decode([token_id]), effects.double().numpy(),
        float(head_parts[head_names.index(name)] @ unembed[token_id]),
    )  # fmt: skip
