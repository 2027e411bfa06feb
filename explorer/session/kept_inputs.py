"""Where a session's kept queries and keys live: the positions a pass processed, per layer.

A pass keeps, per layer, the queries and keys of the positions it processed (as the model used
them, after rotary), O(T·d) per layer like the KV cache, so that a view can compute the attention
it shows (``attention_store.py``). A session alone keeps them in growing tensors (``GrowingKept``);
a session in the model's store keeps them in blocks of it (``PagedKept``), the keys read from its
cache's own blocks where the cache holds them. ``keep_batch`` takes a batched step's new row in for
every session at once.
"""

from __future__ import annotations

import copy

import torch

from explorer.model import Trace
from explorer.model.cache import grown_capacity
from explorer.model.paged import PagedSequence, PagedStore


class GrowingRows:
    """(heads, rows, head_dim) rows that grow along axis 1, in a buffer with room to spare
    (grown by a quarter when full, up to ``limit`` rows), like the KV cache's, so that a step
    writes one row instead of copying them all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer: torch.Tensor | None = None
        self.length = 0

    def add(self, block: torch.Tensor) -> None:
        """Copy ``block`` (heads, new, hd) in after the rows so far (a copy: the pass's keys
        may be the KV cache's own buffer, which undo overwrites)."""
        end = self.length + block.shape[1]
        if self.buffer is None or end > self.buffer.shape[1]:
            capacity = max(end, min(grown_capacity(end), self.limit))
            grown = block.new_empty((block.shape[0], capacity, block.shape[2]))
            if self.buffer is not None:
                grown[:, : self.length] = self.buffer[:, : self.length]
            self.buffer = grown
        self.buffer[:, self.length : end] = block
        self.length = end

    def all(self) -> torch.Tensor:
        """(heads, rows, hd): a view of the rows so far."""
        return self.buffer[:, : self.length]

    def truncate(self, rows: int) -> None:
        self.length = min(self.length, rows)

    @property
    def nbytes(self) -> int:
        return 0 if self.buffer is None else self.buffer.nbytes


class GrowingKept:
    """Cross-attention's kept rows, per layer: the decoder's queries (heads, T, hd), growing a
    row a step, and the source's keys (kv_heads, S, hd), kept once."""

    def __init__(self, n_layers: int, limit: int) -> None:
        self._queries = [GrowingRows(limit) for _ in range(n_layers)]
        self._keys = [GrowingRows(limit) for _ in range(n_layers)]

    @property
    def rows(self) -> int:
        return self._queries[0].length if self._queries else 0

    def key_count(self, layer: int) -> int:
        return self._keys[layer].length

    def add(self, layer: int, queries: torch.Tensor, keys: torch.Tensor | None) -> None:
        self._queries[layer].add(queries)
        if not self._keys[layer].length:
            if keys is None:
                raise ValueError("the source's keys are needed the first time")
            self._keys[layer].add(keys)

    def queries(self, layer: int, first: int, last: int) -> torch.Tensor:
        return self._queries[layer].all()[:, first:last]  # (heads, Tq, hd)

    def keys(self, layer: int, last: int | None = None) -> torch.Tensor:
        return self._keys[layer].all()  # (kv_heads, S, hd): every query reads the whole source

    def truncate(self, rows: int) -> None:
        for queries in self._queries:
            queries.truncate(rows)

    @property
    def nbytes(self) -> int:
        return sum(rows.nbytes for rows in (*self._queries, *self._keys))

    def fork(self) -> GrowingKept:
        """A copy (small: a translator's few layers of queries; the source's keys are shared, read only)."""
        other = copy.copy(self)
        other._queries = [copy.deepcopy(rows) for rows in self._queries]
        other._keys = list(self._keys)
        return other


class PagedKept:
    """Self-attention's kept rows: the queries of every position in the model's record store
    (``explorer/model/paged.py``), and their keys. The keys are the session's cache's own blocks
    when its cache holds the same keys (the full cache: no policy evicts one), else a sequence of
    their own in the model's store of kept keys: SmolLM2's keys were kept twice, 23 kB a position
    of its 138. A batched step writes every session's new rows with one call per layer
    (``keep_batch``)."""

    def __init__(self, store: PagedStore, key_store: PagedStore) -> None:
        self.sequence = PagedSequence(store)  # the queries
        self.key_store = key_store
        # The keys: the cache's sequence (borrowed: the cache writes them) or one of the key store's.
        self.key_sequence: PagedSequence | None = None
        self.lengths = [0] * store.n_layers  # rows kept per layer (a pass keeps layer by layer)

    @property
    def rows(self) -> int:
        return self.lengths[0] if self.lengths else 0

    def key_count(self, layer: int) -> int:
        return self.lengths[layer]

    @property
    def capacity(self) -> int:
        return self.sequence.capacity

    def borrows(self, cache_keys: PagedSequence | None) -> bool:
        """Whether the keys kept are ``cache_keys``, which the pass has written already."""
        return cache_keys is not None and self.key_sequence is cache_keys

    def keys_for(self, cache_keys: PagedSequence | None) -> PagedSequence:
        """Where the keys go: the cache's (``cache_keys``: the session's cache holds the same keys)
        when this session keeps its first rows; a sequence of its own otherwise."""
        if self.key_sequence is None:
            self.key_sequence = cache_keys if cache_keys is not None else PagedSequence(self.key_store)
        return self.key_sequence

    def add(
        self, layer: int, queries: torch.Tensor, keys: torch.Tensor | None, cache_keys: PagedSequence | None = None
    ) -> None:
        """queries (heads, new, hd) and keys (kv_heads, new, hd) of the same new positions;
        ``cache_keys``: the session's cache's sequence if it holds these keys (``held_keys``)."""
        start, end = self.lengths[layer], self.lengths[layer] + queries.shape[1]
        key_sequence = self.keys_for(cache_keys)
        if layer == 0:
            self.sequence.prepare(start, end)
            if not self.borrows(cache_keys):
                key_sequence.prepare(start, end)
        self.sequence.write(layer, start, {"queries": queries})
        if not self.borrows(cache_keys):
            key_sequence.write(layer, start, {"keys": keys})
        self.lengths[layer] = self.sequence.length = end

    def queries(self, layer: int, first: int, last: int) -> torch.Tensor:
        return self.sequence.read(layer, "queries", last, first)  # (heads, Tq, hd)

    def keys(self, layer: int, last: int | None = None) -> torch.Tensor:
        end = self.lengths[layer] if last is None else last
        return self.key_sequence.read(layer, "keys", end)  # (kv_heads, Tk, hd)

    def truncate(self, rows: int) -> None:
        self.lengths = [min(n, rows) for n in self.lengths]
        self.sequence.truncate(rows)
        if rows == 0:  # a new start (rebuild_cache): the keys go where the next pass says
            self.key_sequence = None
        elif self.key_sequence is not None:
            self.key_sequence.truncate(rows)

    @property
    def nbytes(self) -> int:
        """Bytes of the queries and keys kept (the keys counted whether or not the cache holds them)."""
        return self.sequence.nbytes + self.rows * self.key_store.bytes_per_position()

    def fork(self, cache_keys: PagedSequence | None = None) -> PagedKept:
        """The same rows, their blocks shared until either writes (``PagedSequence.fork``); the keys
        are ``cache_keys`` (the forked cache's) where this one's were its cache's."""
        other = copy.copy(self)
        other.sequence, other.lengths = self.sequence.fork(), list(self.lengths)
        if cache_keys is None and self.key_sequence is not None:
            other.key_sequence = self.key_sequence.fork()
        elif cache_keys is not None:
            other.key_sequence = cache_keys
        return other


def keep_batch(
    kept: list[PagedKept],
    trace: Trace,
    n_layers: int,
    batch_rows: list[int] | None = None,
    cache_keys: list[PagedSequence | None] | None = None,
) -> None:
    """Row ``batch_rows[i]`` (by default i) of a batched step's trace (one new position per row) joins
    ``kept[i]``: per layer, one write of the queries for the whole batch, and one of the keys for
    the rows whose cache does not hold them already (``cache_keys[i]``, see ``PagedKept.add``).
    Every ``kept`` is in one store."""
    store = kept[0].sequence.store
    cache_keys = cache_keys or [None] * len(kept)
    for rows in kept:
        rows.sequence.prepare(rows.rows, rows.rows + 1)
    slots = torch.tensor([rows.sequence.slot(rows.rows) for rows in kept], device=store.device)  # (B,)
    own_keys = _own_key_writes(kept, cache_keys)
    for layer in range(n_layers):
        name = f"decoder.{layer}.self_attn"
        queries, keys = trace[f"{name}.q"][:, :, -1], trace[f"{name}.k"][:, :, -1]  # (B, heads or kv_heads, hd)
        if batch_rows is not None and len(batch_rows) != queries.shape[0]:
            queries, keys = queries[batch_rows], keys[batch_rows]
        store.write(layer, slots, {"queries": queries.transpose(0, 1)})
        for key_store, (rows, key_slots) in own_keys.items():
            key_store.write(layer, key_slots, {"keys": keys[rows].transpose(0, 1)})
    for rows in kept:
        rows.lengths = [n + 1 for n in rows.lengths]
        rows.sequence.length = rows.lengths[0]


def _own_key_writes(kept: list[PagedKept], cache_keys: list[PagedSequence | None]) -> dict:
    """{store: ((N,) rows of the batch, (N,) slots)}: where the new keys of the rows whose cache
    does not hold them go, per store (their own key store, or a cache's sequence they kept after
    the cache was switched off or replaced); at most two stores."""
    writes: dict[PagedStore, tuple[list[int], list[int]]] = {}
    for i, (rows, cached) in enumerate(zip(kept, cache_keys, strict=True)):
        key_sequence = rows.keys_for(cached)
        if rows.borrows(cached):
            continue
        key_sequence.prepare(rows.rows, rows.rows + 1)
        key_sequence.length = rows.rows + 1
        batch, slots = writes.setdefault(key_sequence.store, ([], []))
        batch.append(i)
        slots.append(key_sequence.slot(rows.rows))
    return {
        key_store: (torch.tensor(batch), torch.tensor(slots, device=key_store.device))
        for key_store, (batch, slots) in writes.items()
    }
