"""A window (with or without sinks) over the model's store: ``Window(W)`` and ``Sinks(S, W)`` as
a cache whose positions live in blocks like every session's (``paged.py``), so that a session
under them steps in a batch like any other (``batch.PagedBatch`` masks each row's evicted keys).

A new query reads the first ``sinks`` positions and the last ``window`` (itself included): the
entries ``policy_cache.PolicyCache`` holds in its ``sinks + window`` slots, the same keys with the
same rotary angles (each keeps the position it was written at). The positions in between are
evicted: the eviction log says when, and a block whose positions are all evicted goes back to the
store (a hole in the table, never read again). What a window evicts cannot come back: an undo
runs the kept tokens again (``session/cache_plan.py``), as under any policy.
"""

from __future__ import annotations

import torch

from .cache import KVCache, LayerKV
from .cache_policy import CachePolicy, Sinks, Window
from .paged import PagedStore
from .policy_cache import EvictionLog


def reads_of(policy: CachePolicy) -> tuple[int, int] | None:
    """(sinks, window) for a policy this cache can hold (positions kept, full precision), else None."""
    if policy.bits is not None or policy.in_cache_positions:
        return None
    if type(policy) is Window:
        return 0, policy.size
    if type(policy) is Sinks:
        return policy.sinks, policy.window
    return None


class WindowedKVCache(KVCache):
    """Keys and values in the store; each query reads its sinks and its last ``window`` positions."""

    def __init__(self, n_layers: int, store: PagedStore, reads: tuple[int, int], log: EvictionLog | None) -> None:
        super().__init__(n_layers, store)
        self.reads = reads
        self.sinks, self.window = reads
        self.budget = self.sinks + self.window
        self.log = log

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> LayerKV:
        """Write the new positions (1, kv_heads, n, hd); return what their queries read: every
        position while none is evicted (one pass while the cache has room), then for a single
        new query its sinks and last ``window`` positions."""
        start, n = self.lengths[layer], keys.shape[2]
        end = start + n
        if n > 1 and end > self.budget:
            raise ValueError("an evicting cache takes one position per pass once it is full")
        sequence = self._sequence_for(keys)
        if layer == 0:
            sequence.prepare(start, end)
        sequence.write(layer, start, {"keys": keys[0], "values": values[0]})
        self.advance(layer, n)
        if end <= self.budget:
            return LayerKV(sequence.read(layer, "keys", end)[None], sequence.read(layer, "values", end)[None])
        held_keys, held_values = (self._held(layer, name, end)[None] for name in ("keys", "values"))
        return LayerKV(held_keys, held_values, new_keys=keys, new_values=values)

    def _held(self, layer: int, name: str, end: int) -> torch.Tensor:
        """(kv_heads, sinks + window, hd): the sinks, then the last ``window`` positions."""
        recent = self.sequence.read(layer, name, end, start=end - self.window)
        if not self.sinks:
            return recent
        return torch.cat([self.sequence.read(layer, name, self.sinks), recent], dim=1)

    def advance(self, layer: int, n_new: int) -> None:
        """As ``KVCache.advance``; past the budget, the position the new query no longer reads is
        logged as evicted, and once the last layer has moved, the blocks no query reads again go back."""
        super().advance(layer, n_new)
        end = self.lengths[layer]
        if end <= self.budget:
            return
        if self.log is not None:
            kv_heads = self.store.fields["keys"]
            self.log.record(layer, torch.full((kv_heads,), end - 1 - self.window), end - 1)
        if layer == len(self.lengths) - 1:
            self.sequence.let_go_before(end - self.window, keep=self.sinks)

    def truncate(self, length: int) -> None:
        if length != self.length:
            raise ValueError("an evicted entry cannot be taken back: rebuild the cache")

    def held_positions(self, layer: int) -> torch.Tensor:
        """(kv_heads, held) the positions layer ``layer`` holds (those the next query reads, but its own)."""
        end = self.lengths[layer]
        kept = (
            torch.arange(end)
            if end <= self.budget
            else torch.cat([torch.arange(self.sinks), torch.arange(end - self.window, end)])
        )
        return kept.expand(self.store.fields["keys"], -1)

    def quantized_positions(self, layer: int) -> int:
        return 0

    @property
    def self_attn_bytes(self) -> int:
        """The entries held (at most ``sinks + window`` a layer), as the policy counts them."""
        per_layer = self.store.bytes_per_position() // self.store.n_layers
        return sum(min(n, self.budget) for n in self.lengths) * per_layer
