"""One cached step for several sessions at once: the caches of a batch.

A cached step of a small model is bound by reading the weights (each step is matrix-vector
products over every weight), so a batch of sessions that each add one token costs little more
than one: the projections and feed-forward layers read each weight once for every row. The
sessions' texts differ in length, so attention cannot be one batched product: each row attends
over its own cache, with the same kernel a step alone uses (``MultiHeadAttention`` sees the
``RowsKV`` this module makes). Row b of the batch is session b.

    cache = CacheBatch([a.cache, b.cache, c.cache])
    model(next_ids, cache=cache, last_only=True)  # next_ids (3, 1): each session's new token
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .cache import KVCache, LayerKV


@dataclass
class RowsKV:
    """Keys and values of a batch whose rows attend over caches of different lengths."""

    rows: list[LayerKV]  # row b: (1, kv_heads, T_b, hd) each
    new_keys: torch.Tensor | None = None  # (B, kv_heads, new, hd): this step's keys (self-attention only)
    new_values: torch.Tensor | None = None


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
    """The caches of the sessions in a batch, used by a pass as if it were one cache."""

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

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> RowsKV:
        """Row b's new keys and values (B, kv_heads, new, hd) join session b's cache."""
        rows = [
            cache.append(layer, keys[b : b + 1], values[b : b + 1]) for b, cache in enumerate(self.caches)
        ]  # fmt: skip
        return RowsKV(rows, keys, values)
