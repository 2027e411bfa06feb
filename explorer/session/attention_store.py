"""What attention is computed from: each layer's kept queries and keys, and the rows computed so far.

A pass keeps, per layer, the queries and keys of the positions it processed (as the model used
them, after rotary): O(T·d) per layer, like the KV cache. A view computes softmax(q kᵀ · scale +
mask) for the layer it shows, when it shows it (``explorer/model/attention.py``'s
``attention_weights``), instead of every pass recording T x T x heads for every layer.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch

from explorer.errors import InputError
from explorer.model import ModelConfig, Trace
from explorer.model.attention import attention_weights, causal_mask
from explorer.model.cache import grown_capacity
from explorer.model.paged import PagedSequence, PagedStore
from explorer.model.policy_cache import EvictionLog


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


class AttentionRows:
    """One layer's attention probabilities computed so far, (heads, rows, keys), grown row by row.

    A row never changes once computed: row i is softmax(q_i kᵀ/√d) over keys that are fixed
    (the source's, for cross-attention) or that are its own past (causal self-attention, whose
    later keys it gives exactly zero weight). So after a step only the new row is computed:
    O(T) per step instead of O(T²). Undo forgets the rows it removed, in a fresh buffer, so
    that an array handed out before never changes under its holder.
    """

    def __init__(self, heads: int, keys_fixed: int | None, limit: int) -> None:
        self.heads, self.limit = heads, limit  # at most ``limit`` rows (the session's cap)
        self.keys_fixed = keys_fixed  # the source length (cross-attention), or None (keys grow with rows)
        self.buffer = np.zeros((heads, 0, keys_fixed or 0), dtype=np.float32)
        self.rows = 0

    def extend(self, new_rows: np.ndarray) -> None:
        """Append (heads, n, keys) rows, keys being the row count after them (causal) or fixed."""
        end = self.rows + new_rows.shape[1]
        if end > self.buffer.shape[1]:
            # Room for a quarter more (grown_capacity, like the cache), not double: the buffer is
            # square, so doubling the rows quadrupled its bytes (a ~190-token SmolLM2 session held
            # (9, 384, 384) floats, 5.3 MB, for 1.4 MB of rows: 160 MB over a class of 30).
            capacity = max(end, min(grown_capacity(end), self.limit))
            grown = np.zeros((self.heads, capacity, self.keys_fixed or capacity), dtype=np.float32)
            grown[:, : self.rows, : self.buffer.shape[2]] = self.buffer[:, : self.rows]
            self.buffer = grown
        self.buffer[:, self.rows : end, : new_rows.shape[2]] = new_rows
        self.rows = end

    def truncate(self, rows: int) -> None:
        if rows < self.rows:
            kept = np.zeros_like(self.buffer)
            kept[:, :rows] = self.buffer[:, :rows]
            self.buffer, self.rows = kept, rows

    def view(self, first: int, last: int, n_keys: int) -> np.ndarray:
        out = self.buffer[:, first:last, :n_keys]
        out.flags.writeable = False  # shared by the views that ask for it
        return out


class AttentionInputs:
    """What one attention stack's probabilities are made of, per layer: the queries
    (heads, T, head_dim) of every position so far, and the keys (kv_heads, keys, head_dim)
    they read. Self-attention's keys grow with the queries (and are masked causally);
    cross-attention's are the source's, fixed.

    The probabilities of the layer a view asked for last are kept (``AttentionRows``), so that
    the next step computes only its new row: (heads, T, T) float32, 38 MB for SmolLM2 at 1,024
    positions. (The heatmap and the all-heads image show one layer; a view of every layer
    computes each in turn.)"""

    def __init__(
        self,
        kept: PagedKept | GrowingKept,
        heads: int,
        causal: bool,
        max_rows: int,
        scale: float,
        windows: list[int | None] | None = None,
        position_bias: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
    ) -> None:
        self.causal, self.max_rows, self.scale = causal, max_rows, scale  # scale: ModelConfig.score_scale
        self.kept, self.heads = kept, heads  # the queries and keys, per layer; query heads
        self.windows = windows  # each layer's sliding window (ModelConfig.window_of), or None: no window
        self.position_bias = position_bias  # query positions -> (1, heads, Tq, keys): T5's relative positions
        self.evictions: EvictionLog | None = None  # a cache policy's: which keys each query no longer read
        self._computed: tuple[int, AttentionRows] | None = None  # (layer, its rows) a view asked for last

    @property
    def rows(self) -> int:
        return self.kept.rows

    @property
    def nbytes(self) -> int:
        """Bytes held for the queries and keys."""
        return self.kept.nbytes

    def add(self, layer: int, queries: torch.Tensor, keys: torch.Tensor | None) -> None:
        """queries (heads, new, hd) of the new positions; keys (kv_heads, new, hd) of the same
        positions (self-attention), or of the whole source the first time (cross-attention;
        None after that)."""
        self.kept.add(layer, queries, keys)

    def fork(self, cache_keys: PagedSequence | None = None) -> AttentionInputs:
        """The same kept rows (forked); the probabilities a view computed are computed again on demand."""
        other = copy.copy(self)
        other.kept = self.kept.fork(cache_keys) if cache_keys is not None else self.kept.fork()
        other._computed = None
        return other

    def truncate(self, rows: int) -> None:
        self.kept.truncate(rows)
        if self._computed is not None:
            self._computed[1].truncate(rows)

    def compute(self, layer: int, first: int, last: int) -> np.ndarray:
        """(heads, last - first, keys) float32 for the queries at positions first .. last - 1,
        computed now from the kept queries and keys (nothing is kept)."""
        q = self.kept.queries(layer, first, last)  # (heads, Tq, hd)
        keys = self.kept.keys(layer, last)  # (kv_heads, Tk, hd): a query's future keys get zero weight: not read
        mask = None
        if self.causal:
            window = self.windows[layer] if self.windows else None
            mask = causal_mask(q.shape[1], keys.shape[1], q.device, first_query=first, window=window)
            if self.evictions is not None:  # (heads, Tq, Tk): and not evicted before the query ran
                mask = mask & self.held_for(layer, first, last, q.shape[0], keys.shape[0], keys.shape[1])
        bias = None
        if self.position_bias is not None:
            bias = self.position_bias(torch.arange(first, last, device=q.device))  # (1, heads, Tq, last)
        return attention_weights(q[None].float(), keys[None].float(), mask, self.scale, bias)[0].cpu().numpy()

    def held_for(self, layer: int, first: int, last: int, heads: int, kv_heads: int, n_keys: int) -> torch.Tensor:
        """(heads, last - first, n_keys) True where the cache still held the key when the query ran."""
        evicted_at = self.evictions.evicted_at(layer, n_keys, kv_heads)  # (kv_heads, Tk)
        queries = torch.arange(first, last)[None, :, None]  # (1, Tq, 1)
        held = evicted_at[:, None, :] > queries  # (kv_heads, Tq, Tk)
        return held.repeat_interleave(heads // kv_heads, dim=0)  # a GQA group's heads read one kv head

    def probabilities(self, layer: int, first: int = 0, last: int | None = None) -> np.ndarray:
        """(heads, queries, keys) float32 for the queries at positions first .. last - 1, every key
        (a causal row's future is 0); the rows not computed before are computed now."""
        if not self.kept.rows:
            raise InputError("no attention was recorded in this session")
        rows, n_keys = self.rows, self.kept.key_count(layer)
        if self._computed is None or self._computed[0] != layer:  # another layer: its rows from the start
            self._computed = (layer, AttentionRows(self.heads, None if self.causal else n_keys, self.max_rows))
        computed = self._computed[1]
        if computed.rows < rows:
            computed.extend(self.compute(layer, computed.rows, rows))
        return computed.view(first, rows if last is None else last, n_keys)


def decoder_position_bias(decoder, device, query_positions: torch.Tensor) -> torch.Tensor | None:
    """The decoder's relative position bias (1, heads, Tq, keys) for queries at these positions
    over the keys up to the last of them (T5); None for other families.

    A function of the decoder, not a method of the session: a session keeping its own bound
    method would be a reference cycle, and the session's tensors (tens of MB) would wait for
    Python's rare full garbage collection instead of going when its last reference does."""
    return decoder.position_bias(query_positions.to(device))


class SessionAttention:
    """All of one session's attention: the decoder's self-attention and (translators) its
    cross-attention, computed on demand from the queries and keys each pass kept; the encoder's,
    computed once from the source (small: (heads, S, S) per layer)."""

    def __init__(
        self,
        config: ModelConfig,
        max_rows: int,
        position_bias: Callable[[torch.Tensor], torch.Tensor | None],
        record_store: PagedStore,
        key_store: PagedStore,
    ) -> None:
        self.config = config
        n, scale = config.n_layers, config.score_scale
        windows = [config.window_of(i) for i in range(n)]
        heads = config.n_heads
        self.self_inputs = AttentionInputs(
            PagedKept(record_store, key_store), heads, True, max_rows, scale, windows, position_bias
        )
        n_cross = n if config.is_encoder_decoder else 0
        self.cross_inputs = AttentionInputs(GrowingKept(n_cross, max_rows), heads, False, max_rows, scale)
        self.encoder_probs: list[np.ndarray] = []  # per layer (heads, S, S)

    def keep_encoder(self, trace: Trace) -> None:
        """The encoder's attention probabilities, from the pass over the source."""
        for i in range(self.config.n_encoder_layers):
            self.encoder_probs.append(trace.self_attention(i, "encoder")[0].float().cpu().numpy())

    def keep(self, trace: Trace, n_new: int, cache_keys: PagedSequence | None = None) -> None:
        """The queries of the newest ``n_new`` positions, and the keys they added, of every layer
        (``cache_keys``: the session's cache's sequence when it holds these keys; ``PagedKept``)."""
        kept = self.self_inputs.kept
        for i in range(self.config.n_layers):
            name = f"decoder.{i}.self_attn"
            kept.add(i, trace[f"{name}.q"][0, :, -n_new:], trace[f"{name}.k"][0, :, -n_new:], cache_keys)
        self.keep_cross(trace, n_new)

    def keep_cross(self, trace: Trace, n_new: int) -> None:
        """A translator's cross-attention queries of the newest ``n_new`` positions (and the
        source's keys, from the prefill: a batched step does not pass them)."""
        if not self.config.is_encoder_decoder:
            return
        for i in range(self.config.n_layers):
            name = f"decoder.{i}.cross_attn"
            keys = trace[f"{name}.k"][0] if f"{name}.k" in trace else None
            self.cross_inputs.add(i, trace[f"{name}.q"][0, :, -n_new:], keys)

    def fork(self, cache_keys: PagedSequence | None = None) -> SessionAttention:
        """A copy for a forked session (``GenerationSession.fork``): the kept rows shared; the keys
        ``cache_keys`` (the forked cache's sequence) where this session's are its cache's."""
        other = copy.copy(self)
        other.self_inputs, other.cross_inputs = self.self_inputs.fork(cache_keys), self.cross_inputs.fork()
        return other

    def truncate(self, rows: int) -> None:
        self.self_inputs.truncate(rows)
        self.cross_inputs.truncate(rows)

    def self_attention(self, layer: int, first: int = 0, last: int | None = None) -> np.ndarray:
        """(heads, queries, T) of the queries at positions first .. last - 1 (by default all)."""
        self.check_layer(layer)
        return self.self_inputs.probabilities(layer, first, last)

    def query_attention(self, position: int, length: int) -> np.ndarray:
        """(layers, heads, position + 1) what the token at ``position`` (of ``length``) read, in every layer."""
        if not 0 <= position < length:
            raise InputError(f"position {position} does not exist; choose 0 to {length - 1}")
        rows = [self.self_inputs.compute(i, position, position + 1)[:, 0] for i in range(self.config.n_layers)]
        return np.stack(rows)  # (layers, heads, position + 1): the future is not computed

    def cross_attention(self, layer: int) -> np.ndarray:
        """(heads, T, S) cross-attention of every target token over the source."""
        self.require_translator("cross-attention")
        self.check_layer(layer)
        return self.cross_inputs.probabilities(layer)

    def encoder_attention(self, layer: int) -> np.ndarray:
        """(heads, S, S) encoder self-attention over the source."""
        self.require_translator("encoder attention")
        if not 0 <= layer < self.config.n_encoder_layers:
            raise InputError(f"encoder layer {layer} does not exist; choose 0 to {self.config.n_encoder_layers - 1}")
        if not self.encoder_probs:
            raise InputError("no attention was recorded in this session")
        return self.encoder_probs[layer]

    def check_layer(self, layer: int) -> None:
        """Refuse a decoder layer the model does not have, saying which exist."""
        if not 0 <= layer < self.config.n_layers:
            raise InputError(f"layer {layer} does not exist; choose 0 to {self.config.n_layers - 1}")

    def require_translator(self, what: str) -> None:
        if not self.config.is_encoder_decoder:
            raise InputError(f"{what} exists only for translators (encoder-decoder models)")
