"""What one forward pass or cached step recorded.

Recording is opt-in: a pass records only the kinds named in its ``Record`` request, so
that the fast path (no recording) runs at full speed. Every tensor has a stable name
that says where it came from, in the style ``decoder.3.self_attn.probs``:

===============================  ===================================  ==========
name                             shape                                kind
===============================  ===================================  ==========
``{stack}.{i}.self_attn.probs``  (batch, heads, queries, keys)        attention
``decoder.{i}.cross_attn.probs`` (batch, heads, target, source)       attention
``{stack}.{i}.{attn}.scores``    (batch, heads, queries, keys)        scores
``{stack}.{i}.{attn}.q|k|v``     (batch, heads, positions, head_dim)  qkv
``{stack}.{i}.{attn}.q|k``       (batch, heads, positions, head_dim)  qk
``{stack}.embed``                (batch, positions, d_model)          residual
``{stack}.{i}.resid_after_attn`` (batch, positions, d_model)          residual
``decoder.{i}.resid_after_cross``(batch, positions, d_model)          residual
``{stack}.{i}.resid_after_ffn``  (batch, positions, d_model)          residual
``logits``                       (batch, positions, vocab)            logits
===============================  ===================================  ==========

``stack`` is ``encoder`` or ``decoder`` (decoder-only models have just the decoder).
Scores are pre-softmax and already scaled by 1/sqrt(head_dim); masked entries are -inf.
Queries and keys are as attention used them (after rotary). Keys and values in a cached step
cover the whole cache (past and new positions), and grouped-query keys/values are recorded per
key/value head, before sharing. ``qk`` keeps the same q and k as ``qkv`` without copying: its
keys in a cached step are the cache's own buffer, valid until the cache next changes (the
session copies the rows it keeps, and computes attention from them when a view asks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

KINDS = frozenset({"attention", "scores", "qkv", "qk", "residual", "logits"})


@dataclass(frozen=True)
class Record:
    """Which kinds of tensor a pass should keep. ``Record()`` keeps nothing."""

    kinds: frozenset = frozenset()

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - KINDS
        if unknown:
            raise ValueError(f"unknown record kinds {sorted(unknown)}; choose from {sorted(KINDS)}")

    @classmethod
    def of(cls, *kinds: str) -> Record:
        return cls(frozenset(kinds))

    @classmethod
    def everything(cls) -> Record:
        return cls(KINDS)

    def __contains__(self, kind: str) -> bool:
        return kind in self.kinds


def residual_stream_names(n_layers: int, stack: str = "decoder") -> list[str]:
    """The residual stream after the embeddings, then after each whole layer (n_layers + 1 names)."""
    return [f"{stack}.embed"] + [f"{stack}.{i}.resid_after_ffn" for i in range(n_layers)]


NOTHING = Record()
ATTENTION = Record.of("attention")


@dataclass
class Trace:
    """Named tensors from one pass, detached. Empty when nothing was requested."""

    record: Record = NOTHING
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    def keep(self, kind: str, name: str, tensor: torch.Tensor) -> None:
        if kind in self.record:
            self.tensors[name] = tensor.detach()

    def __getitem__(self, name: str) -> torch.Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"{name!r} was not recorded; recorded: {sorted(self.tensors)}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def names(self) -> list[str]:
        return list(self.tensors)

    # Convenience accessors for the tensors the explorer shows most.
    def self_attention(self, layer: int, stack: str = "decoder") -> torch.Tensor:
        """(batch, heads, queries, keys) attention probabilities of one layer."""
        return self[f"{stack}.{layer}.self_attn.probs"]

    def cross_attention(self, layer: int) -> torch.Tensor:
        """(batch, heads, target, source) cross-attention probabilities of one decoder layer."""
        return self[f"decoder.{layer}.cross_attn.probs"]

    def residual(self, layer: int, stack: str = "decoder") -> torch.Tensor:
        """(batch, positions, d_model) residual stream after the whole of layer ``layer``."""
        return self[f"{stack}.{layer}.resid_after_ffn"]
