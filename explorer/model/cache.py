"""The key/value cache: what makes one generation step cost O(T) instead of O(T^2).

Keys and values of past positions never change (the causal mask guarantees that a
position's keys depend only on it and the past), so a step can compute them for the one
new token and reuse the rest. Cross-attention keys and values depend only on the encoder
output, so they are computed once per source sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LayerKV:
    """Keys and values of one attention layer, per key/value head."""

    keys: torch.Tensor  # (batch, kv_heads, positions, head_dim)
    values: torch.Tensor  # (batch, kv_heads, positions, head_dim)

    @property
    def length(self) -> int:
        return self.keys.shape[2]

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes


class KVCache:
    """Per-layer keys and values that grow one position per step."""

    def __init__(self, n_layers: int) -> None:
        self.self_attn: list[LayerKV | None] = [None] * n_layers
        self.cross_attn: list[LayerKV | None] = [None] * n_layers

    @property
    def length(self) -> int:
        """Positions cached so far (the decoder side)."""
        first = self.self_attn[0]
        return 0 if first is None else first.length

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> LayerKV:
        """Add new positions to one layer's self-attention cache; return the whole of it."""
        old = self.self_attn[layer]
        if old is not None:
            keys = torch.cat([old.keys, keys], dim=2)
            values = torch.cat([old.values, values], dim=2)
        self.self_attn[layer] = LayerKV(keys, values)
        return self.self_attn[layer]

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (undo). Cross-attention is unaffected."""
        for i, kv in enumerate(self.self_attn):
            if kv is not None:
                self.self_attn[i] = LayerKV(kv.keys[:, :, :length], kv.values[:, :, :length])

    @property
    def self_attn_bytes(self) -> int:
        return sum(kv.nbytes for kv in self.self_attn if kv is not None)

    @property
    def cross_attn_bytes(self) -> int:
        return sum(kv.nbytes for kv in self.cross_attn if kv is not None)

    @property
    def nbytes(self) -> int:
        """Bytes held: 2 x layers x kv_heads x head_dim x positions x bytes per value (+ cross)."""
        return self.self_attn_bytes + self.cross_attn_bytes
