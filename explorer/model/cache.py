"""The key/value cache: what makes one generation step cost O(T) instead of O(T^2).

Keys and values of past positions never change (the causal mask guarantees that a
position's keys depend only on it and the past), so a step can compute them for the one
new token and reuse the rest. Cross-attention keys and values depend only on the encoder
output, so they are computed once per source sentence.

Each layer's keys and values live in a buffer with room to grow (by a quarter, at least 64
positions, when full), so that appending a position writes one slice instead of copying the
whole cache, while a class of sessions wastes little memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

INITIAL_CAPACITY = 64


def grown_capacity(needed: int) -> int:
    """Room for ``needed`` positions and a quarter more (at least 64 more): appending stays O(1)
    on average, and a class of sessions wastes at most a fifth of their memory (doubling wasted
    up to half). The session's kept queries and keys grow the same way."""
    return needed + max(INITIAL_CAPACITY, needed // 4)


@dataclass
class LayerKV:
    """Keys and values of one attention layer, per key/value head."""

    keys: torch.Tensor  # (batch, kv_heads, positions, head_dim)
    values: torch.Tensor  # (batch, kv_heads, positions, head_dim)
    # A cache that must see the new queries' attention weights (H2O's scores) is handed them,
    # (batch, heads, Tq, positions), once attention is computed.
    on_attention: Callable[[torch.Tensor], None] | None = None
    # A cache whose entries are not in position order (a policy's slots): the positions this pass
    # adds, (batch, kv_heads, new, head_dim), which the k and v taps see instead of the whole cache.
    new_keys: torch.Tensor | None = None
    new_values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return self.keys.shape[2]

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes


class GrowingKV:
    """A (batch, kv_heads, capacity, head_dim) pair of buffers and how much of them is used."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        capacity = grown_capacity(keys.shape[2])
        shape = (*keys.shape[:2], capacity, keys.shape[3])
        self.keys = keys.new_empty(shape)
        self.values = values.new_empty(shape)
        self.length = 0
        self.append(keys, values)

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        new_length = self.length + keys.shape[2]
        if new_length > self.keys.shape[2]:
            self._grow(grown_capacity(new_length))
        self.keys[:, :, self.length : new_length] = keys
        self.values[:, :, self.length : new_length] = values
        self.length = new_length

    def _grow(self, capacity: int) -> None:
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_empty((*old.shape[:2], capacity, old.shape[3]))
            new[:, :, : self.length] = old[:, :, : self.length]
            setattr(self, name, new)

    def view(self) -> LayerKV:
        return LayerKV(self.keys[:, :, : self.length], self.values[:, :, : self.length])

    @property
    def nbytes(self) -> int:
        """Bytes of the positions held (arithmetic: no slicing of the buffers)."""
        batch, kv_heads, _, head_dim = self.keys.shape
        return 2 * batch * kv_heads * self.length * head_dim * self.keys.element_size()


class KVCache:
    """Per-layer keys and values that grow one position per step."""

    def __init__(self, n_layers: int) -> None:
        self._self_attn: list[GrowingKV | None] = [None] * n_layers
        self.cross_attn: list[LayerKV | None] = [None] * n_layers

    @property
    def length(self) -> int:
        """Positions cached so far (the decoder side)."""
        first = self._self_attn[0]
        return 0 if first is None else first.length

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> LayerKV:
        """Add new positions to one layer's self-attention cache; return the whole of it."""
        entry = self._self_attn[layer]
        if entry is None:
            self._self_attn[layer] = entry = GrowingKV(keys, values)
        else:
            entry.append(keys, values)
        return entry.view()

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (undo). Cross-attention is unaffected."""
        for entry in self._self_attn:
            if entry is not None:
                entry.length = min(entry.length, length)

    @property
    def self_attn_bytes(self) -> int:
        """2 x layers x kv_heads x head_dim x positions x bytes per value."""
        return sum(e.nbytes for e in self._self_attn if e is not None)

    @property
    def cross_attn_bytes(self) -> int:
        return sum(kv.nbytes for kv in self.cross_attn if kv is not None)

    @property
    def nbytes(self) -> int:
        """Bytes of the positions held (self and cross attention)."""
        return self.self_attn_bytes + self.cross_attn_bytes
