"""Layer normalisation (GPT-2, Marian) and RMS normalisation (Llama)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight: LayerNorm without centring and without bias."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # PyTorch's fused kernel computes exactly the formula above, in float32.
        return F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).to(x.dtype) * self.weight


def make_norm(kind: str, dim: int, eps: float) -> nn.Module:
    if kind == "layer":
        return nn.LayerNorm(dim, eps=eps)
    if kind == "rms":
        return RMSNorm(dim, eps)
    raise ValueError(f"unknown norm {kind!r}; expected 'layer' or 'rms'")
