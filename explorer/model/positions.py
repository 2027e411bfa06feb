"""How a model knows where a token stands: learned, sinusoidal, rotary or relative positions.

Self-attention alone is blind to order; each family adds position information in its
own way. Learned and sinusoidal positions are added to the token embedding once, at the
bottom of the stack. Rotary positions (RoPE) instead rotate every query and key inside
attention, so that a query-key dot product depends on their distance. T5's relative
positions add nothing to any vector: each head adds a learned number to each score, chosen
by how far apart the query and the key are.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_table(n_positions: int, dim: int) -> torch.Tensor:
    """(n_positions, dim) table of the 2017 paper's sines and cosines.

    Frequency k is 1 / 10000^(2k/dim). Like Marian, the first half of the vector holds the
    sines and the second half the cosines (the paper interleaves them; the information is
    the same, the layout must match the checkpoint).
    """
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (P, 1)
    k = torch.arange(dim // 2, dtype=torch.float64)[None, :]  # (1, dim/2)
    angle = position / torch.pow(10000.0, 2 * k / dim)  # (P, dim/2)
    table = torch.zeros(n_positions, dim, dtype=torch.float64)
    table[:, : dim // 2] = torch.sin(angle)
    table[:, dim // 2 : 2 * (dim // 2)] = torch.cos(angle)
    return table.float()


class SinusoidalPositions(nn.Module):
    """Fixed position vectors, added to the token embeddings."""

    def __init__(self, n_positions: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_table(n_positions, dim), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.table[positions]  # (T, dim)


class RotaryPositions(nn.Module):
    """Rotary position embedding, in the "rotate half" layout of Llama checkpoints.

    Each head vector is split into two halves (x1, x2); pair (x1[j], x2[j]) is rotated by
    the angle position * theta^(-2j/head_dim).
    """

    def __init__(self, n_positions: int, head_dim: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angle = torch.arange(n_positions, dtype=torch.float32)[:, None] * inv_freq[None, :]
        angle = torch.cat([angle, angle], dim=-1)  # (P, head_dim)
        self.register_buffer("cos", angle.cos(), persistent=False)
        self.register_buffer("sin", angle.sin(), persistent=False)

    def angles(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin), each (T, head_dim), for ``positions`` (T,); computed once per pass. For
        (B, T) positions (a batch of sessions at different lengths) each is (B, 1, T, head_dim),
        one row per session, broadcast over the heads."""
        if positions.dim() == 2:
            return self.cos[positions][:, None], self.sin[positions][:, None]
        return self.cos[positions], self.sin[positions]


def rotate(x: torch.Tensor, angles: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rotate x (batch, heads, T, head_dim) by the rotary ``angles`` of its positions. Angles
    narrower than the head (partial rotary, Pythia) rotate its first numbers; the rest pass."""
    cos, sin = angles
    rotary_dim = cos.shape[-1]
    if rotary_dim < x.shape[-1]:
        return torch.cat([rotate(x[..., :rotary_dim], angles), x[..., rotary_dim:]], dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    rotated_half = torch.cat([-x2, x1], dim=-1)
    return x * cos + rotated_half * sin


class RelativePositionBias(nn.Module):
    """T5: a learned bias per head for each bucket of relative distance (key - query), added to
    the scores before softmax. Distances below half the buckets each get their own bucket; longer
    ones share log-spaced buckets up to ``max_distance``. Bidirectional (the encoder) splits the
    buckets between keys before and after the query; the decoder only looks back."""

    def __init__(self, n_buckets: int, max_distance: int, n_heads: int, bidirectional: bool) -> None:
        super().__init__()
        self.table = nn.Embedding(n_buckets, n_heads)  # (buckets, heads)
        self.n_buckets, self.max_distance, self.bidirectional = n_buckets, max_distance, bidirectional

    def forward(self, query_positions: torch.Tensor, n_keys: int) -> torch.Tensor:
        """(1, heads, Tq, Tk) biases for queries at ``query_positions`` (Tq,) over keys 0..n_keys-1."""
        keys = torch.arange(n_keys, device=query_positions.device)
        relative = keys[None, :] - query_positions[:, None]  # (Tq, Tk)
        return self.table(self.bucket(relative)).permute(2, 0, 1)[None]

    def by_distance(self, distances: torch.Tensor) -> torch.Tensor:
        """(heads, n) the bias each head adds at each relative distance (key - query) of ``distances`` (n,)."""
        return self.table(self.bucket(distances)).T

    def bucket(self, relative: torch.Tensor) -> torch.Tensor:
        """Each relative distance's bucket (T5's and Mesh TensorFlow's rule)."""
        n, buckets = self.n_buckets, torch.zeros_like(relative)
        if self.bidirectional:
            n //= 2
            buckets = buckets + (relative > 0).long() * n  # keys after the query: the upper half
            distance = relative.abs()
        else:
            distance = (-relative).clamp(min=0)  # how far back
        exact = n // 2
        far = exact + (torch.log(distance.float() / exact) / math.log(self.max_distance / exact) * (n - exact)).long()
        return buckets + torch.where(distance < exact, distance, far.clamp(max=n - 1))


def embedding_scale(d_model: int, scale: bool) -> float:
    """Marian and the 2017 paper multiply token embeddings by sqrt(d_model)."""
    return math.sqrt(d_model) if scale else 1.0
