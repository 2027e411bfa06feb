"""Layer normalisation (GPT-2, Marian) and RMS normalisation (Llama)."""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight: LayerNorm without centring and without bias."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


def make_norm(kind: str, dim: int, eps: float) -> nn.Module:
    if kind == "layer":
        return nn.LayerNorm(dim, eps=eps)
    if kind == "rms":
        return RMSNorm(dim, eps)
    raise ValueError(f"unknown norm {kind!r}; expected 'layer' or 'rms'")
