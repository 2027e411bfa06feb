"""What one forward pass or cached step recorded, and the name of every tap.

Every internal tensor passes through a named tap (``explorer/model/taps.py``). A pass keeps
only the kinds (or the names) its ``Record`` asks for, so that the fast path (nothing kept,
nothing changed) runs at full speed; interventions change a tap's tensor by name. The taps:

=====================================  ===================================  ==========
name                                   shape                                kind
=====================================  ===================================  ==========
``{stack}.embed``                      (batch, positions, d_model)          residual
``{stack}.{i}.{attn}.input``           (batch, queries, d_model)            sublayers
``{stack}.{i}.{attn}.q|k``             (batch, heads, positions, head_dim)  qk
``{stack}.{i}.{attn}.v``               (batch, heads, positions, head_dim)  qkv
``{stack}.{i}.{attn}.scores``          (batch, heads, queries, keys)        scores
``{stack}.{i}.{attn}.probs``           (batch, heads, queries, keys)        attention
``{stack}.{i}.{attn}.z``               (batch, heads, queries, head_dim)    heads
``{stack}.{i}.{attn}.out``             (batch, queries, d_model)            sublayers
``{stack}.{i}.resid_after_attn``       (batch, positions, d_model)          residual
``decoder.{i}.resid_after_cross``      (batch, positions, d_model)          residual
``{stack}.{i}.ffn.input``              (batch, positions, d_model)          sublayers
``{stack}.{i}.ffn.hidden``             (batch, positions, d_ff)             sublayers
``{stack}.{i}.ffn.out``                (batch, positions, d_model)          sublayers
``{stack}.{i}.resid_after_ffn``        (batch, positions, d_model)          residual
``encoder.memory``                     (batch, source, d_model)             residual
``final_norm``                         (batch, positions, d_model)          residual
``logits``                             (batch, positions, vocab)            logits
=====================================  ===================================  ==========

``stack`` is ``encoder`` or ``decoder`` (decoder-only models have just the decoder); ``attn`` is
``self_attn`` or, in a translator's decoder, ``cross_attn``. ``input`` is what the sublayer
reads (normed first in a pre-norm model); ``z`` is each head's output, softmax(q kᵀ/√d) v,
before the output projection mixes the heads; ``hidden`` is the feed-forward's activation
(after the gate in SwiGLU).
Scores are pre-softmax and already scaled by 1/sqrt(head_dim); masked entries are -inf.
Queries and keys are as attention used them (after rotary). Keys and values in a cached step
cover the whole cache (past and new positions), and grouped-query keys/values are recorded per
key/value head, before sharing. ``qk`` keeps the same q and k as ``qkv`` without copying: its
keys in a cached step are the cache's own buffer, valid until the cache next changes (the
session copies the rows it keeps, and computes attention from them when a view asks).
Scores and probabilities exist only in a pass that keeps or changes them: otherwise attention
runs PyTorch's fused kernel, which never makes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

KINDS = frozenset({"attention", "scores", "qkv", "qk", "heads", "sublayers", "residual", "logits"})


@dataclass(frozen=True)
class Record:
    """Which tensors a pass should keep: whole kinds, and single taps by name. ``Record()`` keeps nothing."""

    kinds: frozenset = frozenset()
    names: frozenset = frozenset()

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - KINDS
        if unknown:
            raise ValueError(f"unknown record kinds {sorted(unknown)}; choose from {sorted(KINDS)}")

    @classmethod
    def of(cls, *kinds: str) -> Record:
        return cls(frozenset(kinds))

    @classmethod
    def taps(cls, *names: str) -> Record:
        """Keep these taps only (names as in the table above)."""
        return cls(names=frozenset(names))

    @classmethod
    def everything(cls) -> Record:
        return cls(KINDS)

    def __contains__(self, kind: str) -> bool:
        return kind in self.kinds

    def wants(self, kind: str, name: str) -> bool:
        # "qkv" keeps the queries and keys too (as copies); "qk" keeps only them.
        return kind in self.kinds or name in self.names or (kind == "qk" and "qkv" in self.kinds)


def residual_stream_names(n_layers: int, stack: str = "decoder") -> list[str]:
    """The residual stream after the embeddings, then after each whole layer (n_layers + 1 names)."""
    return [f"{stack}.embed"] + [f"{stack}.{i}.resid_after_ffn" for i in range(n_layers)]


NOTHING = Record()
ATTENTION = Record.of("attention")


class _RowOf(Mapping):
    """Batch row ``b`` of a pass's tensors, each (1, ...) sliced when read (read only)."""

    def __init__(self, tensors: Mapping[str, torch.Tensor], b: int) -> None:
        self._tensors, self._b = tensors, b

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._tensors[name][self._b : self._b + 1]

    def __iter__(self):
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


@dataclass
class Trace:
    """Named tensors from one pass, detached. Empty when nothing was requested."""

    record: Record = NOTHING
    tensors: dict[str, torch.Tensor] | Mapping[str, torch.Tensor] = field(
        default_factory=dict
    )  # a batch row: read only

    def wants(self, kind: str, name: str) -> bool:
        return self.record.wants(kind, name)

    def keep(self, kind: str, name: str, tensor: torch.Tensor) -> None:
        if self.record.wants(kind, name):
            # Cached keys and values are views of a buffer that undo may overwrite: "qkv" keeps
            # copies; "qk" (the session's own record, which copies the rows it keeps) does not.
            copy = kind in ("qk", "qkv") and "qkv" in self.record
            self.tensors[name] = tensor.detach().clone() if copy else tensor.detach()

    def __getitem__(self, name: str) -> torch.Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"{name!r} was not recorded; recorded: {sorted(self.tensors)}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def names(self) -> list[str]:
        return list(self.tensors)

    def row(self, b: int) -> Trace:
        """What batch row ``b`` recorded, as a pass of batch 1 would have (a batched step of
        several sessions, explorer/batching.py). Each tensor is sliced when it is read: a batch
        of 32 sessions does not slice every tensor 32 times for the few that are looked at."""
        return Trace(self.record, _RowOf(self.tensors, b))

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
