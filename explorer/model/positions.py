"""How a model knows where a token stands: learned, sinusoidal, or rotary positions.

Self-attention alone is blind to order; each family adds position information in its
own way. Learned and sinusoidal positions are added to the token embedding once, at the
bottom of the stack. Rotary positions (RoPE) instead rotate every query and key inside
attention, so that a query-key dot product depends on their distance.
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


def embedding_scale(d_model: int, scale: bool) -> float:
    """Marian and the 2017 paper multiply token embeddings by sqrt(d_model)."""
    return math.sqrt(d_model) if scale else 1.0
