"""A cache under a policy (``cache_policy``): what it holds is really all it holds.

- An evicting policy keeps each layer's entries in ``budget`` slots. Until they are full, a new
  entry takes the next slot; then it takes the slot of the entry its policy evicts (per key/value
  head). Nothing is ever shifted or copied: a step writes one slot, whatever the length, and
  attention reads the slots in any order (a single new query has no mask: every held key is its
  past). Each slot remembers the position its entry was written at, rotary keys keep the angle of
  that position, and the next token's position is the count of tokens seen, not of entries held.
- A quantized cache keeps every entry: the newest ``recent`` to ``recent + group - 1`` tokens in
  full precision, the older ones, a group of ``group`` tokens at a time, as integers: keys per
  channel (one scale and minimum per channel for the group's tokens), values per token (one per
  ``group`` numbers of each token). Attention reads them dequantized.
- A sliding layer (Gemma 3's local layers, Mistral's window) reads only the last ``window``
  positions, whatever the policy holds: an entry the window has passed is never read again, so it
  no longer counts as held, and its slot is the first a new entry takes (before the policy chooses
  a victim). The policy's budget thus applies within the window: where the window is no larger
  than the budget the policy never evicts there and the layer is as the model has it; where it is
  larger, the policy evicts within it and the window still takes what it passes (a sink, a heavy
  hitter). The new query reads its slots under a mask by position (``LayerKV.visible``). A global
  layer follows the policy alone. Only the policy's own evictions are logged (``EvictionLog``):
  what the window hides the heatmaps hide already.
"""

from __future__ import annotations

import torch

from .cache import GrowingKV, KVCache, LayerKV
from .cache_policy import CachePolicy, HeldEntries, PolicyError
from .positions import RotaryPositions, rotate


def quantize(x: torch.Tensor, bits: int, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric min-max quantization of ``x``, one scale and minimum along ``dim`` (kept as 1):
    ``x ≈ ints * scale + minimum`` with ints in 0 .. 2**bits - 1 (uint8)."""
    minimum = x.amin(dim=dim, keepdim=True)
    scale = (x.amax(dim=dim, keepdim=True) - minimum) / (2**bits - 1)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # a constant group: any scale is exact
    ints = ((x - minimum) / scale).round().clamp(0, 2**bits - 1).to(torch.uint8)
    return ints, scale, minimum


def pack4(ints: torch.Tensor) -> torch.Tensor:
    """Two 4-bit integers per byte along the last dimension (even index in the low nibble)."""
    return ints[..., 0::2] | (ints[..., 1::2] << 4)


def unpack4(packed: torch.Tensor) -> torch.Tensor:
    return torch.stack([packed & 0xF, packed >> 4], dim=-1).flatten(-2)


NEVER = torch.iinfo(torch.int32).max  # an entry still held


class EvictionLog:
    """When each entry left each layer's cache: ``evicted_at(layer)[h, p]`` is the first query
    position that no longer read position p's key in key/value head h (NEVER while it is held).
    An entry that leaves never comes back, so this says what every past query read: the session's
    attention views mask with it, and so show what the model computed."""

    def __init__(self, n_layers: int) -> None:
        self.layers: list[torch.Tensor | None] = [None] * n_layers  # (kv_heads, room) int32 each

    def record(self, layer: int, positions: torch.Tensor, at: int) -> None:
        """``positions`` (kv_heads,): the entry each head lets go for the query at ``at`` (-1: none)."""
        log = self._room(layer, positions.shape[0], at)
        positions = positions.cpu()
        heads = (positions >= 0).nonzero()[:, 0]
        log[heads, positions[heads]] = at

    def record_all(self, layer: int, evicted: torch.Tensor, at: int) -> None:
        """``evicted`` (kv_heads, positions) True for every entry let go for the query at ``at``."""
        log = self._room(layer, evicted.shape[0], at)
        log[:, : evicted.shape[1]][evicted.cpu()] = at

    def _room(self, layer: int, kv_heads: int, at: int) -> torch.Tensor:
        """The layer's log, grown to hold positions up to ``at``."""
        log = self.layers[layer]
        if log is None or log.shape[1] <= at:
            grown = torch.full((kv_heads, max(64, 2 * at)), NEVER, dtype=torch.int32)
            if log is not None:
                grown[:, : log.shape[1]] = log
            self.layers[layer] = log = grown
        return log

    def evicted_at(self, layer: int, n_positions: int, kv_heads: int) -> torch.Tensor:
        """(kv_heads, n_positions) int32."""
        out = torch.full((kv_heads, n_positions), NEVER, dtype=torch.int32)
        log = self.layers[layer]
        if log is not None:
            kept = min(n_positions, log.shape[1])
            out[:, :kept] = log[:, :kept]
        return out

    def clear(self) -> None:
        self.layers = [None] * len(self.layers)


class _EvictingKV:
    """One layer's keys and values in ``budget`` slots, with the position and the accumulated
    attention of each (batch 1)."""

    def __init__(
        self, policy: CachePolicy, like: torch.Tensor, log: EvictionLog, layer: int,
        rotary: RotaryPositions | None = None, window: int | None = None,
    ) -> None:  # fmt: skip
        _, kv_heads, _, head_dim = like.shape
        self.log, self.layer, self.window = log, layer, window  # window: a sliding layer's reach
        self.head_dim, self.element_size = head_dim, like.element_size()
        # StreamingLLM's way: the keys are held unrotated and turned to their rank at every read.
        self.rotary = rotary if policy.in_cache_positions else None
        self.policy, self.budget = policy, policy.budget
        self.keys = like.new_zeros((1, kv_heads, self.budget, head_dim))
        self.values = like.new_zeros((1, kv_heads, self.budget, head_dim))
        self.positions = torch.full((kv_heads, self.budget), -1, dtype=torch.int64, device=like.device)
        self.scores = torch.zeros((kv_heads, self.budget), device=like.device)  # (kv_heads, slots)
        self.used = 0  # slots filled
        self.seen = 0  # positions written (the next one's position)

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> LayerKV:
        """Write the new positions (1, kv_heads, n, hd); return what the new queries read."""
        n = keys.shape[2]
        if n > 1 and self.used + n > self.budget:
            raise ValueError("an evicting cache takes one position per pass once it is full")
        for i in range(n):
            self._write(keys[:, :, i : i + 1], values[:, :, i : i + 1])
        read_keys, read_values = self.read()
        held = LayerKV(read_keys, read_values, new_keys=keys, new_values=values)
        if n == 1 and self.window is not None:  # (1, kv_heads, 1, used): the slots within the window
            held.visible = self.live()[None, :, None, :]
        if self.policy.needs_attention:
            held.on_attention = self._add_scores
        return held

    def _write(self, key: torch.Tensor, value: torch.Tensor) -> None:
        kv_heads = self.positions.shape[0]
        if self.used < self.budget:
            slots = torch.full((kv_heads,), self.used, device=key.device)
            self.used += 1
        else:
            held = HeldEntries(self.positions, self.held_keys()[0], self.scores)
            victims = self.policy.victims(held, self.seen)  # (kv_heads,)
            passed = self._passed_by_window()  # (kv_heads, slots)
            slots = torch.where(passed.any(dim=1), self._oldest(passed), victims)
            evicted = self.positions.gather(1, victims[:, None])[:, 0].masked_fill(passed.any(dim=1), -1)
            self.log.record(self.layer, evicted, self.seen)  # the policy's evictions, not the window's
        self._store(slots, key, value)
        self.positions.scatter_(1, slots[:, None], self.seen)
        self.scores.scatter_(1, slots[:, None], 0.0)
        self.seen += 1

    def held_keys(self) -> torch.Tensor:
        """(1, kv_heads, budget, hd) the keys in their slots, as stored (what key norm ranks)."""
        return self.keys

    def _passed_by_window(self) -> torch.Tensor:
        """(kv_heads, slots) True for an entry the new query (at ``seen``) no longer reads: its
        layer's window has passed it (never on a global layer)."""
        if self.window is None:
            return torch.zeros_like(self.positions, dtype=torch.bool)
        return (self.positions >= 0) & (self.positions <= self.seen - self.window)

    def _oldest(self, among: torch.Tensor) -> torch.Tensor:
        """(kv_heads,) each head's slot of the oldest entry marked in ``among`` (kv_heads, slots)."""
        return self.positions.masked_fill(~among, torch.iinfo(torch.int64).max).argmin(dim=1)

    def live(self) -> torch.Tensor:
        """(kv_heads, used) True for the entries the last query read: on a sliding layer those
        within its window (the others wait for a new entry to take their slot)."""
        positions = self.positions[:, : self.used]
        if self.window is None:
            return torch.ones_like(positions, dtype=torch.bool)
        return positions > self.seen - 1 - self.window

    def _store(self, slots: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        """Put the new entry (1, kv_heads, 1, hd) in each head's slot."""
        kv_heads = slots.shape[0]
        if self.rotary is not None:  # it came rotated to its rank (PolicyCache.length): held unrotated
            rank = torch.tensor([self.next_rank], device=key.device)
            cos, sin = self.rotary.angles(rank)
            key = rotate(key, (cos, -sin))
        index = slots.view(1, kv_heads, 1, 1).expand_as(key)
        self.keys.scatter_(2, index, key)
        self.values.scatter_(2, index, value)

    def read(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(1, kv_heads, used, hd) keys and values as the queries read them."""
        keys = self.keys[:, :, : self.used] if self.rotary is None else self._keys_at_their_ranks()
        return keys, self.values[:, :, : self.used]

    @property
    def next_rank(self) -> int:
        """The new entry's rank among those held once it is written: its position in the cache."""
        return min(self.seen, self.budget - 1)

    def _keys_at_their_ranks(self) -> torch.Tensor:
        """(1, kv_heads, used, hd) the held keys, each rotated to its rank by position in its head."""
        positions = self.positions[:, : self.used]
        ranks = positions.argsort(dim=1).argsort(dim=1)  # (kv_heads, used)
        cos, sin = self.rotary.cos[ranks], self.rotary.sin[ranks]  # (kv_heads, used, rotary_dim)
        return rotate(self.keys[:, :, : self.used], (cos, sin))

    def _add_scores(self, probs: torch.Tensor) -> None:
        """H2O: each held key adds the weight every new query gave it, summed over its GQA group."""
        _, heads, n_queries, n_keys = probs.shape  # (1, heads, Tq, used)
        kv_heads = self.positions.shape[0]
        grouped = probs[0].float().view(kv_heads, heads // kv_heads, n_queries, n_keys)
        self.scores[:, :n_keys] += grouped.sum(dim=(1, 2))

    def held_positions(self) -> torch.Tensor:
        """(kv_heads, used) the positions held, in slot order (-1: a slot whose entry a sliding
        layer's window has passed)."""
        return self.positions[:, : self.used].masked_fill(~self.live(), -1)

    @property
    def nbytes(self) -> int:
        """The entries held (on a sliding layer, those within its window)."""
        return 2 * int(self.live().sum()) * self.head_dim * self.element_size


class _QuantizedSlotsKV(_EvictingKV):
    """An evicting cache whose slots hold integers: each entry is quantized per token (keys and
    values alike, in groups of ``group`` numbers) as it is written; the ``recent`` newest entries
    also keep a full-precision copy in a small ring, which reads prefer while they are held."""

    def __init__(
        self, policy: CachePolicy, like: torch.Tensor, log: EvictionLog, layer: int, window: int | None = None
    ) -> None:  # fmt: skip
        super().__init__(policy.under, like, log, layer, window=window)
        self.quantization = policy
        _, kv_heads, _, head_dim = like.shape
        self.keys = self.values = None  # no full-precision slots: the integers are what is held
        width = head_dim // 2 if policy.bits == 4 else head_dim
        groups = head_dim // policy.group
        self.ints = {name: like.new_zeros((1, kv_heads, self.budget, width), dtype=torch.uint8) for name in "kv"}
        self.scales = {name: like.new_zeros((1, kv_heads, self.budget, groups, 1)) for name in "kv"}
        self.minimums = {name: like.new_zeros((1, kv_heads, self.budget, groups, 1)) for name in "kv"}
        ring = max(policy.recent, 1)
        self.ring = {name: like.new_zeros((1, kv_heads, ring, head_dim)) for name in "kv"}
        self.ring_positions = torch.full((kv_heads, ring), -1, dtype=torch.int64, device=like.device)
        self.ring_slots = torch.zeros((kv_heads, ring), dtype=torch.int64, device=like.device)

    def _store(self, slots: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        kv_heads, q = slots.shape[0], self.quantization
        for name, x in (("k", key), ("v", value)):  # x (1, kv_heads, 1, hd)
            ints, scale, minimum = quantize(x.float().unflatten(-1, (-1, q.group)), q.bits, dim=-1)
            ints = ints.flatten(-2)
            ints = pack4(ints) if q.bits == 4 else ints
            self.ints[name].scatter_(2, slots.view(1, kv_heads, 1, 1).expand_as(ints), ints)
            index = slots.view(1, kv_heads, 1, 1, 1).expand_as(scale)
            self.scales[name].scatter_(2, index, scale.to(self.scales[name].dtype))
            self.minimums[name].scatter_(2, index, minimum.to(self.minimums[name].dtype))
        if q.recent:
            cell = self.seen % q.recent
            self.ring["k"][:, :, cell], self.ring["v"][:, :, cell] = key[:, :, 0], value[:, :, 0]
            self.ring_positions[:, cell], self.ring_slots[:, cell] = self.seen, slots

    def held_keys(self) -> torch.Tensor:
        return self._dequantized("k", self.budget)

    def _dequantized(self, name: str, n: int) -> torch.Tensor:
        """(1, kv_heads, n, hd) the first n slots' integers as numbers."""
        ints = self.ints[name][:, :, :n]
        ints = unpack4(ints) if self.quantization.bits == 4 else ints
        grouped = ints.unflatten(-1, (-1, self.quantization.group))  # (1, kv, n, groups, G)
        numbers = grouped * self.scales[name][:, :, :n] + self.minimums[name][:, :, :n]
        return numbers.flatten(-2).to(self.ring[name].dtype)

    def read(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every held entry dequantized, but the recent ones still held: from the ring, exact."""
        keys, values = self._dequantized("k", self.used), self._dequantized("v", self.used)
        if self.quantization.recent:
            newest = self.seen - 1
            still_held = self.positions.gather(1, self.ring_slots.clamp(max=self.used - 1)) == self.ring_positions
            recent = still_held & (self.ring_positions > newest - self.quantization.recent)  # (kv_heads, ring)
            for h, cell in recent.nonzero().tolist():
                slot = int(self.ring_slots[h, cell])
                keys[0, h, slot], values[0, h, slot] = self.ring["k"][0, h, cell], self.ring["v"][0, h, cell]
        return keys, values

    @property
    def nbytes(self) -> int:
        """The entries held (on a sliding layer, those within its window), each its integers, scales
        and minimums, and the ring of full-precision recent entries."""
        parts = (self.ints, self.scales, self.minimums)
        per_entry = sum(t[0, 0, 0].nbytes for part in parts for t in part.values())
        return int(self.live().sum()) * per_entry + sum(t.nbytes for t in self.ring.values())


class _PressedKV:
    """One layer's keys and values under a prefill press (SnapKV): the prompt's pass writes them
    all and, once its attention is known, keeps the policy's choice per key/value head; the
    generated tokens' entries then join them (batch 1). On a sliding layer the press chooses among
    the prompt keys within the window of the prompt's last query (the others are never read
    again), and the window goes on passing what it kept."""

    def __init__(self, policy: CachePolicy, log: EvictionLog, layer: int, window: int | None = None) -> None:
        self.policy, self.log, self.layer, self.window = policy, log, layer, window
        self.store: GrowingKV | None = None
        self.positions: torch.Tensor | None = None  # (kv_heads, held) the position of each entry
        self.seen = 0

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> LayerKV:
        _, kv_heads, n, _ = keys.shape
        prompt = self.store is None
        if prompt:
            self.store = GrowingKV(keys, values)
        else:
            self.store.append(keys, values)
        new = torch.arange(self.seen, self.seen + n, device=keys.device).expand(kv_heads, n)
        self.positions = new if prompt else torch.cat([self.positions, new], dim=1)
        self.seen += n
        held = self.store.view()
        held.new_keys, held.new_values = keys, values
        if n == 1 and self.window is not None:  # (1, kv_heads, 1, held): the entries within the window
            held.visible = self.live()[None, :, None, :]
        if prompt and n > self.policy.budget:  # pressed once the prompt's queries have read it
            held.on_attention = self._press
        return held

    def live(self) -> torch.Tensor:
        """(kv_heads, held) True for the entries the last query read (a sliding layer: within its window)."""
        if self.window is None:
            return torch.ones_like(self.positions, dtype=torch.bool)
        return self.positions > self.seen - 1 - self.window

    def held_positions(self) -> torch.Tensor:
        """(kv_heads, held) in position order; -1 where a sliding layer's window has passed the entry."""
        return self.positions.masked_fill(~self.live(), -1)

    def _press(self, probs: torch.Tensor) -> None:
        """Keep, per key/value head, the prompt keys of the highest scores (in position order)."""
        held = self.store.view()
        kv_heads, n = self.positions.shape
        scores = self.policy.scores(probs[0], kv_heads)  # (kv_heads, T)
        live = self.live()  # (kv_heads, T): the same for every head (the prompt's positions)
        scores = scores.masked_fill(~live, float("-inf"))
        n_kept = min(self.policy.budget, int(live[0].sum()))
        kept = scores.topk(n_kept, dim=1).indices.sort(dim=1).values  # (kv_heads, kept)
        index = kept[None, :, :, None].expand(1, kv_heads, kept.shape[1], held.keys.shape[3])
        self.store = GrowingKV(held.keys.gather(2, index), held.values.gather(2, index))
        evicted = torch.ones((kv_heads, n), dtype=torch.bool, device=kept.device).scatter(1, kept, False)
        self.log.record_all(self.layer, evicted & live, self.seen)  # from the first query after the prompt
        self.positions = self.positions.gather(1, kept)

    @property
    def nbytes(self) -> int:
        """The entries held (a sliding layer: within its window)."""
        if self.store is None:
            return 0
        return self.store.nbytes * int(self.live().sum()) // self.positions.numel()


class _QuantizedKV:
    """One layer's keys and values, all positions, the old ones as integers (batch 1). A sliding
    layer lets a stored group go once its window has passed every position of it."""

    def __init__(self, bits: int, group: int, recent: int, like: torch.Tensor, window: int | None = None) -> None:
        self.bits, self.group, self.recent, self.window = bits, group, recent, window
        self.dropped = 0  # the first positions, let go (a sliding layer's window passed them)
        self.dtype = like.dtype
        empty = like[:, :, :0]  # (1, kv_heads, 0, hd)
        self.tail_keys, self.tail_values = empty, empty  # full precision, the newest tokens
        self.stored: dict[str, torch.Tensor] = {}  # ints, scales and minimums of the quantized groups
        self.quantized = 0  # tokens held as integers

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> LayerKV:
        """Hold the new positions (1, kv_heads, n, hd); return what this pass's queries read: what
        was held before, as stored, and the new positions in full precision (as KIVI's prefill)."""
        before = self.read()
        read = LayerKV(torch.cat([before.keys, keys], dim=2), torch.cat([before.values, values], dim=2))
        self.tail_keys = torch.cat([self.tail_keys, keys], dim=2)
        self.tail_values = torch.cat([self.tail_values, values], dim=2)
        while self.tail_keys.shape[2] >= self.recent + self.group:  # the oldest group leaves the tail
            self._store_group(self.tail_keys[:, :, : self.group], self.tail_values[:, :, : self.group])
            self.tail_keys, self.tail_values = self.tail_keys[:, :, self.group :], self.tail_values[:, :, self.group :]
        self._let_go_passed_groups()
        return read

    def _let_go_passed_groups(self) -> None:
        """Drop the stored groups whose every position the newest query's window has passed."""
        if self.window is None:
            return
        passed = (self.seen - self.window - self.dropped) // self.group  # groups wholly before the window
        passed = min(max(passed, 0), self.quantized // self.group)
        if not passed:
            return
        tokens = passed * self.group
        for name in self.stored:  # scales and minimums of keys: one per group; the rest: one per token
            first = passed if name in ("k_scale", "k_min") else tokens
            self.stored[name] = self.stored[name][:, :, first:]
        self.quantized -= tokens
        self.dropped += tokens

    def _store_group(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Keys (1, kv_heads, G, hd) per channel: min and max over the G tokens; values per token:
        over each ``group`` numbers of a token."""
        k_ints, k_scale, k_min = quantize(keys.float(), self.bits, dim=2)  # scale (1, kv, 1, hd)
        v_ints, v_scale, v_min = quantize(self._value_groups(values.float()), self.bits, dim=-1)
        parts = {"k_ints": self._packed(k_ints), "k_scale": k_scale.to(self.dtype), "k_min": k_min.to(self.dtype),
                 "v_ints": self._packed(v_ints.flatten(-2)), "v_scale": v_scale.to(self.dtype),
                 "v_min": v_min.to(self.dtype)}  # fmt: skip
        for name, part in parts.items():  # a concatenation every G tokens: O(T / G) a step on average
            self.stored[name] = torch.cat([self.stored[name], part], dim=2) if name in self.stored else part
        self.quantized += self.group

    def _value_groups(self, values: torch.Tensor) -> torch.Tensor:
        """(1, kv, T, hd) -> (1, kv, T, hd / G, G): each token's numbers in groups of G."""
        return values.unflatten(-1, (-1, self.group))

    def _packed(self, ints: torch.Tensor) -> torch.Tensor:
        return pack4(ints) if self.bits == 4 else ints

    def _unpacked(self, ints: torch.Tensor) -> torch.Tensor:
        return unpack4(ints) if self.bits == 4 else ints

    def read(self) -> LayerKV:
        """Every position, dequantized (the old ones) and in full (the tail)."""
        if not self.quantized:
            return LayerKV(self.tail_keys, self.tail_values)
        s = self.stored
        n_groups = self.quantized // self.group
        k_ints = self._unpacked(s["k_ints"]).unflatten(2, (n_groups, self.group))  # (1, kv, groups, G, hd)
        keys = k_ints * s["k_scale"].unsqueeze(3) + s["k_min"].unsqueeze(3)
        v_ints = self._value_groups(self._unpacked(s["v_ints"]))  # (1, kv, T, hd / G, G)
        values = (v_ints * s["v_scale"] + s["v_min"]).flatten(-2)
        keys, values = keys.flatten(2, 3).to(self.dtype), values.to(self.dtype)
        return LayerKV(torch.cat([keys, self.tail_keys], dim=2), torch.cat([values, self.tail_values], dim=2))

    @property
    def seen(self) -> int:
        return self.dropped + self.quantized + self.tail_keys.shape[2]

    @property
    def nbytes(self) -> int:
        tail = self.tail_keys.nbytes + self.tail_values.nbytes
        return tail + sum(part.nbytes for part in self.stored.values())


class PolicyCache(KVCache):
    """A ``KVCache`` whose self-attention entries follow ``policy`` (cross-attention keys and
    values of a translator's source are kept whole: they are read by every step). ``windows``: each
    layer's sliding window (``ModelConfig.window_of``), None for a global layer."""

    def __init__(
        self, n_layers: int, policy: CachePolicy, log: EvictionLog | None = None,
        rotary: RotaryPositions | None = None, windows: list[int | None] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(n_layers)
        self.windows = list(windows) if windows is not None else [None] * n_layers
        if not (policy.evicts or policy.bits):
            raise PolicyError("the full cache is the plain KVCache")
        if policy.in_cache_positions and rotary is None:
            raise PolicyError("positions within the cache need the model's rotary angles")
        self.policy, self.rotary = policy, rotary
        self.log = log if log is not None else EvictionLog(n_layers)
        self._layers: list[_EvictingKV | _PressedKV | _QuantizedKV | None] = [None] * n_layers

    @property
    def length(self) -> int:
        """The next token's position: the count of tokens seen (not of entries held), or, with
        positions within the cache, the rank it will take there."""
        first = self._layers[0]
        if first is None:
            return 0
        return first.next_rank if self.policy.in_cache_positions else first.seen

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> LayerKV:
        entry = self._layers[layer]
        if entry is None:
            p, window = self.policy, self.windows[layer]
            if p.prefill_press:
                entry = _PressedKV(p, self.log, layer, window)
            elif p.evicts and p.bits:
                entry = _QuantizedSlotsKV(p, keys, self.log, layer, window)
            elif p.evicts:
                entry = _EvictingKV(p, keys, self.log, layer, self.rotary, window)
            else:
                entry = _QuantizedKV(p.bits, p.group, p.recent, keys, window)
            self._layers[layer] = entry
        return entry.append(keys, values)

    def truncate(self, length: int) -> None:
        if length != self.length:
            raise ValueError("an evicted or quantized entry cannot be taken back: rebuild the cache")

    def held_positions(self, layer: int) -> torch.Tensor:
        """(kv_heads, held) the positions layer ``layer`` holds (slot order; every position when
        quantized, from the first a sliding layer still holds). On a sliding layer the heads may hold
        different numbers of entries: -1 pads the slots whose entry the window has passed."""
        entry = self._layers[layer]
        if entry is None:
            return torch.zeros((0, 0), dtype=torch.int64)
        if isinstance(entry, _EvictingKV | _PressedKV):
            return entry.held_positions()
        return torch.arange(entry.dropped, entry.seen).expand(entry.tail_keys.shape[1], -1)

    def quantized_positions(self, layer: int) -> int:
        """How many of the first positions layer ``layer`` holds as integers (0 unless quantized)."""
        entry = self._layers[layer]
        return entry.quantized if isinstance(entry, _QuantizedKV) else 0

    @property
    def self_attn_bytes(self) -> int:
        return sum(e.nbytes for e in self._layers if e is not None)
