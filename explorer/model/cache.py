"""The key/value cache: what makes one generation step cost O(T) instead of O(T^2).

Keys and values of past positions never change (the causal mask guarantees that a
position's keys depend only on it and the past), so a step can compute them for the one
new token and reuse the rest. Cross-attention keys and values depend only on the encoder
output, so they are computed once per source sentence.

A session's keys and values live in the model's one store of blocks (``paged.py``), so that a
batch of sessions reads and writes all their caches with one call per layer. (The caches under a
policy keep theirs in ``GrowingKV`` buffers with room to grow, by a quarter, at least 64
positions, when full: appending writes one slice instead of copying the whole cache.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .paged import PagedSequence, PagedStore

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
    # A sliding layer's cache whose entries are not in position order (a policy's slots): which
    # of them the one new query may read, (1, kv_heads, 1, positions), True within the layer's
    # window. None: the attention's own causal (and window) mask by position order.
    visible: torch.Tensor | None = None

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
    """Per-layer keys and values that grow one position per step, kept in a ``PagedStore``
    (``paged.py``): the model's one store, shared by every session's cache, when the model made
    the cache (``model.new_cache()``); a store of its own otherwise."""

    def __init__(self, n_layers: int, store: PagedStore | None = None) -> None:
        self.store = store
        self.sequence: PagedSequence | None = None  # made at the first append (the store's shape is known then)
        self.lengths = [0] * n_layers  # positions held per layer (a pass appends layer by layer)
        # Which positions a new query reads, (sinks, window): the first ``sinks`` and the last
        # ``window`` (window_cache.py); None: every one.
        self.reads: tuple[int, int] | None = None
        self.cross_attn: list[LayerKV | None] = [None] * n_layers
        self._cross_bytes: int | None = None

    @property
    def length(self) -> int:
        """Positions cached so far (the decoder side)."""
        return self.lengths[0] if self.lengths else 0

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> LayerKV:
        """Add new positions (1, kv_heads, new, hd) to one layer's self-attention cache; return
        the whole of it, (1, kv_heads, positions, hd) each."""
        if keys.shape[0] != 1:
            raise ValueError("a KVCache holds one sequence; the sessions of a batch each have their own (CacheBatch)")
        sequence = self._sequence_for(keys)
        start, end = self.lengths[layer], self.lengths[layer] + keys.shape[2]
        if layer == 0:
            sequence.prepare(start, end)
        sequence.write(layer, start, {"keys": keys[0], "values": values[0]})
        self.advance(layer, keys.shape[2])
        return LayerKV(sequence.read(layer, "keys", end)[None], sequence.read(layer, "values", end)[None])

    def advance(self, layer: int, n_new: int) -> None:
        """Layer ``layer`` now holds ``n_new`` positions more (written into the store)."""
        self.lengths[layer] += n_new
        self.sequence.length = self.lengths[layer]

    def _sequence_for(self, keys: torch.Tensor) -> PagedSequence:
        if self.sequence is None:
            if self.store is None:
                heads, head_dim = keys.shape[1], keys.shape[3]
                fields = {"keys": heads, "values": heads}
                self.store = PagedStore(len(self.lengths), fields, head_dim, keys.dtype, keys.device)
            self.sequence = PagedSequence(self.store)
        return self.sequence

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (undo). Cross-attention is unaffected."""
        self.lengths = [min(n, length) for n in self.lengths]
        if self.sequence is not None:
            self.sequence.truncate(length)

    def fork(self) -> KVCache:
        """A cache holding the same positions, sharing their blocks (copied when either writes)."""
        other = KVCache(len(self.lengths), self.store)
        other.lengths = list(self.lengths)
        other.sequence = self.sequence.fork() if self.sequence is not None else None
        other.cross_attn = list(self.cross_attn)  # read only: the source's keys and values
        return other

    @property
    def self_attn_bytes(self) -> int:
        """2 x layers x kv_heads x head_dim x positions x bytes per value."""
        if self.store is None:
            return 0
        per_layer = self.store.bytes_per_position() // self.store.n_layers
        return sum(self.lengths) * per_layer

    @property
    def cross_attn_bytes(self) -> int:
        if self._cross_bytes is None and all(kv is not None for kv in self.cross_attn):
            self._cross_bytes = sum(kv.nbytes for kv in self.cross_attn)  # computed once: the source is fixed
        return self._cross_bytes or sum(kv.nbytes for kv in self.cross_attn if kv is not None)

    @property
    def nbytes(self) -> int:
        """Bytes of the positions held (self and cross attention)."""
        return self.self_attn_bytes + self.cross_attn_bytes
