"""The attention a view shows, computed from each layer's kept queries and keys, and the rows computed so far.

A pass keeps, per layer, the queries and keys of the positions it processed (as the model used
them, after rotary: ``kept_inputs.py``), O(T·d) per layer, like the KV cache. A view computes softmax(q kᵀ · scale +
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
from explorer.session.kept_inputs import GrowingKept, PagedKept


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

    @property
    def held_bytes(self) -> int:
        """Bytes held: the queries and keys, and the layer's attention rows computed for a view."""
        return self.kept.nbytes + (self._computed[1].buffer.nbytes if self._computed is not None else 0)

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

    @property
    def held_bytes(self) -> int:
        """Everything this session's attention holds (the server's budget for sessions counts it)."""
        encoder = sum(probs.nbytes for probs in self.encoder_probs)
        return self.self_inputs.held_bytes + self.cross_inputs.held_bytes + encoder

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
