"""One cached step for several sessions at once: the caches of a batch.

A cached step of a small model is bound by reading the weights (each step is matrix-vector
products over every weight), so a batch of sessions that each add one token costs little more
than one: the projections and feed-forward layers read each weight once for every row. Every
session's cache lives in the model's one store (``paged.py``), so per layer the batch writes
its new keys and values with one indexed write and reads every row's cache with one indexed
read, padded to the longest row; a length mask hides the padding (``PaddedKV``), and attention
is one call for the whole batch. Row b of the batch is session b.

Cross-attention (a translator's source) is read once per session and differs in length by
source: each row attends over its own (``RowsKV``), row by row. So do the rows of a
``CacheBatch`` of any caches (the KV-cache lab steps a policy a row, each in its own cache), and
the rows of a ``SplitBatch`` whose caches are their own (a session under a cache policy stepping
with others: the batch shares every projection and feed-forward product; only attention runs
apart, row by row, over the entries its policy kept).

    cache = batch_of([a.cache, b.cache, c.cache])  # a PagedBatch, or a SplitBatch
    model(next_ids, cache=cache, last_only=True)  # next_ids (3, 1): each session's new token
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .cache import KVCache, LayerKV
from .paged import BLOCK


@dataclass
class RowsKV:
    """Keys and values of a batch whose rows attend over caches of different lengths."""

    rows: list[LayerKV]  # row b: (1, kv_heads, T_b, hd) each
    new_keys: torch.Tensor | None = None  # (B, kv_heads, new, hd): this step's keys (self-attention only)
    new_values: torch.Tensor | None = None


@dataclass
class PaddedKV:
    """Keys and values of a batch's rows, padded to the longest row: (B, kv_heads, T_max, hd);
    ``mask(window)`` (B, 1, 1, T_max) is True where row b has a key (within a sliding window)."""

    keys: torch.Tensor
    values: torch.Tensor
    mask: Callable[[int | None], torch.Tensor]
    new_keys: torch.Tensor  # (B, kv_heads, 1, hd): this step's keys (what the k tap sees)
    new_values: torch.Tensor


@dataclass
class SplitKV:
    """Keys and values of a batch with rows of both kinds: the rows ``paged`` in the store, padded
    (``padded``), and the rows ``apart``, each over its own cache (``own``)."""

    padded: PaddedKV | None
    paged: list[int]
    own: RowsKV
    apart: list[int]
    new_keys: torch.Tensor  # (B, kv_heads, 1, hd): this step's keys (what the k tap sees)
    new_values: torch.Tensor


class _CrossRows:
    """``cache.cross_attn[layer]`` of a batch: each row's source keys and values, computed when
    that session's source was first read (a batch is made of sessions past their prefill)."""

    def __init__(self, caches: list[KVCache]) -> None:
        self.caches = caches

    def __getitem__(self, layer: int) -> RowsKV:
        rows = [cache.cross_attn[layer] for cache in self.caches]
        if any(kv is None for kv in rows):
            raise ValueError("a batched step needs every session's source read once (its prefill) first")
        return RowsKV(rows)


class CacheBatch:
    """The caches of the sessions in a batch, used by a pass as if it were one cache: each row
    over its own cache, attended row by row (any caches: the KV-cache lab's policies)."""

    def __init__(self, caches: list[KVCache]) -> None:
        if not caches:
            raise ValueError("a batch needs at least one cache")
        self.caches = caches
        self.cross_attn = _CrossRows(caches)

    @property
    def lengths(self) -> list[int]:
        return [cache.length for cache in self.caches]

    def new_positions(self, n_new: int, device: torch.device | None = None) -> torch.Tensor:
        """(B, n_new) each row's absolute positions for its new tokens."""
        starts = torch.tensor(self.lengths, device=device)[:, None]  # (B, 1)
        return starts + torch.arange(n_new, device=device)[None, :]

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> RowsKV | PaddedKV:
        """Row b's new keys and values (B, kv_heads, new, hd) join session b's cache."""
        rows = [
            cache.append(layer, keys[b : b + 1], values[b : b + 1]) for b, cache in enumerate(self.caches)
        ]  # fmt: skip
        return RowsKV(rows, keys, values)


class PagedBatch(CacheBatch):
    """The plain caches of the sessions in a batch, all in the model's one store, for one step
    (each session adds one position): one write and one padded read per layer."""

    def __init__(self, caches: list[KVCache]) -> None:
        super().__init__(caches)
        self._lengths = [cache.length for cache in caches]  # before the step
        self._store = caches[0].store
        if any(cache.store is not self._store or cache.sequence is None for cache in caches):
            raise ValueError("a batched step needs caches in one store, past their prefill")
        for cache, length in zip(caches, self.lengths, strict=True):
            cache.sequence.prepare(length, length + 1)
        device = self._store.device
        self._write = torch.tensor(
            [c.sequence.slot(n) for c, n in zip(caches, self.lengths, strict=True)], device=device
        )
        self._tables, self._width, self._masks = self._block_tables(), max(self._lengths) + 1, {}
        # Per field, the memory every layer's read is copied into (a layer's keys are used up by
        # its attention before the next layer reads): fresh memory each time costs page faults.
        self._read_into = {name: self._read_buffer(heads) for name, heads in self._store.fields.items()}

    def _read_buffer(self, heads: int) -> torch.Tensor:
        """(B x blocks, BLOCK, heads, hd): room for one layer's read of one field (``read_blocks``)."""
        store = self._store
        return torch.empty((self._tables.numel(), BLOCK, heads, store.head_dim), dtype=store.dtype, device=store.device)

    def _block_tables(self) -> torch.Tensor:
        """(B, blocks) each row's blocks for its positions up to the longest row's, padded with
        block 0 (its positions masked)."""
        count = -(-(max(self._lengths) + 1) // BLOCK)
        tables = [c.sequence.blocks[:count] + [0] * (count - len(c.sequence.blocks[:count])) for c in self.caches]
        tables = [[max(block, 0) for block in table] for table in tables]  # a hole (HOLE) is read as block 0, masked
        return torch.tensor(tables, device=self._store.device)

    def mask(self, window: int | None) -> torch.Tensor:
        """(B, 1, 1, T_max) True where row b's new query may look (its keys, within a sliding window)."""
        if window not in self._masks:
            keys = torch.arange(self._width, device=self._tables.device)[None, :]  # (1, T_max)
            newest = torch.tensor(self.lengths, device=keys.device)[:, None]  # (B, 1): each row's new position
            visible = keys <= newest
            if window is not None:
                visible &= keys > newest - window
            self._masks[window] = (visible & self._reads(keys, newest))[:, None, None, :]
        return self._masks[window]

    def _reads(self, keys: torch.Tensor, newest: torch.Tensor) -> torch.Tensor:
        """(B, T_max) what each row's cache lets its query read: every key, or under a window
        policy its sinks and its last keys (``window_cache.py``)."""
        reads = [cache.reads or (0, self._width) for cache in self.caches]
        sinks = torch.tensor([r[0] for r in reads], device=keys.device)[:, None]  # (B, 1)
        window = torch.tensor([r[1] for r in reads], device=keys.device)[:, None]
        return (keys < sinks) | (keys > newest - window)

    @property
    def lengths(self) -> list[int]:
        """Each row's length before this step (the step's new positions)."""
        return self._lengths

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> PaddedKV:
        """Row b's new keys and values (B, kv_heads, 1, hd) join session b's cache (one write);
        every row's cache, padded (one read each)."""
        if keys.shape[2] != 1:
            raise ValueError("a batched step adds one token per row")
        store = self._store
        store.write(
            layer, self._write, {"keys": keys[:, :, 0].transpose(0, 1), "values": values[:, :, 0].transpose(0, 1)}
        )
        for cache in self.caches:
            cache.advance(layer, 1)
        into = self._read_into
        all_keys = store.read_blocks(layer, "keys", self._tables, self._width, into["keys"])  # (B, kv_heads, T_max, hd)
        all_values = store.read_blocks(layer, "values", self._tables, self._width, into["values"])
        return PaddedKV(all_keys, all_values, self.mask, keys, values)


def in_store(cache: KVCache) -> bool:
    """Whether the cache keeps its positions in blocks of a store (most caches under a policy keep their own)."""
    return cache.sequence is not None


class SplitBatch(CacheBatch):
    """A step of sessions whose caches are in the model's store and of sessions whose caches are
    their own (a cache under a policy): one write and one padded read per layer for the first
    (``PagedBatch``), the others each append to and read their own cache."""

    def __init__(self, caches: list[KVCache]) -> None:
        super().__init__(caches)
        self._lengths = [cache.length for cache in caches]  # before the step
        self.paged = [b for b, cache in enumerate(caches) if in_store(cache)]
        self.apart = [b for b in range(len(caches)) if b not in self.paged]
        self._paged = PagedBatch([caches[b] for b in self.paged]) if self.paged else None

    @property
    def lengths(self) -> list[int]:
        """Each row's length before this step (the step's new positions)."""
        return self._lengths

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> SplitKV:
        """Row b's new keys and values (B, kv_heads, 1, hd) join session b's cache."""
        padded = None
        if self._paged is not None:
            padded = self._paged.append(layer, keys[self.paged], values[self.paged])
        own = [self.caches[b].append(layer, keys[b : b + 1], values[b : b + 1]) for b in self.apart]
        return SplitKV(padded, self.paged, RowsKV(own), self.apart, keys, values)


def batch_of(caches: list[KVCache]) -> CacheBatch:
    """The caches of a batched step: a ``PagedBatch`` when all are in one store, else a ``SplitBatch``."""
    stores = {id(cache.store) for cache in caches}
    if all(in_store(cache) for cache in caches) and len(stores) == 1:
        return PagedBatch(caches)
    return SplitBatch(caches)
