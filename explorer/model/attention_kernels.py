"""Faster ways to compute ``attention.attention`` when nobody looks at the scores: the same
numbers (the tests check each against the written-out formula), without the (Tq x Tk) matrix.

- ``fused``: PyTorch's fused kernel (``scaled_dot_product_attention``), grouped-query heads
  read in place, T5's bias and the mask as one float mask, a cached step of a sliding layer
  reading only its window.
- ``rows``: a batch whose rows are different sessions' steps, each over its own cache
  (``batch.RowsKV``), the fused kernel row by row.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from .cache import LayerKV

# attention.attention: (q, keys, values, mask, scale) -> (z, probs)
Formula = Callable[..., tuple[torch.Tensor, torch.Tensor]] | None


def fused(
    q: torch.Tensor,  # (B, heads, Tq, hd)
    keys: torch.Tensor,  # (B, kv_heads, Tk, hd)
    values: torch.Tensor,  # (B, kv_heads, Tk, hd)
    mask: torch.Tensor | None,  # (Tq, Tk) or (B, 1, Tq, Tk): True where a query may look
    scale: float | None,
    bias: torch.Tensor | None = None,  # (1 or B, heads, Tq, Tk)
    window: int | None = None,  # a sliding layer's reach
) -> torch.Tensor:
    """(B, heads, Tq, hd): ``attention(q, keys, values, mask, scale, bias)[0]``."""
    if q.shape[2] == 1 and mask is not None and window is not None:  # a cached step of a sliding layer
        keys, values, mask = keys[:, :, -window:], values[:, :, -window:], None  # its last keys only
    if bias is not None:  # a float mask is added to the scores: the bias, -inf where hidden
        mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
    grouped = q.shape[1] != keys.shape[1]
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=scale, enable_gqa=grouped)


def rows(
    q: torch.Tensor, kv_rows: list[LayerKV], scale: float | None, window: int | None = None, formula: Formula = None
) -> torch.Tensor:
    """(B, heads, 1, hd): row b's one new query (q[b]) over row b's own keys and values. A row
    whose cache scores its keys by the attention they receive (H2O) is computed by ``formula``
    (``attention.attention``, passed in: that module imports this one) and hands it the weights."""
    if q.shape[2] != 1:
        raise ValueError("a batched step adds one token per row")
    reach = slice(-window, None) if window else slice(None)  # a sliding layer's last keys
    return torch.cat([_row(q[b : b + 1], row, reach, scale, formula) for b, row in enumerate(kv_rows)])


def _row(q: torch.Tensor, row: LayerKV, reach: slice, scale: float | None, formula: Formula) -> torch.Tensor:
    """(1, heads, 1, hd) one row's query over its cache (a sliding layer's slots under a policy:
    the keys its ``visible`` mask allows, not the last ones)."""
    mask = None
    if row.visible is not None:  # (1, kv_heads, 1, Tk) -> (1, heads, 1, Tk)
        mask, reach = row.visible.repeat_interleave(q.shape[1] // row.visible.shape[1], dim=1), slice(None)
    if row.on_attention is None:
        return fused(q, row.keys[:, :, reach], row.values[:, :, reach], mask, scale)
    if formula is None:
        raise ValueError("a cache that scores keys by attention needs the formula")
    z, probs = formula(q, row.keys, row.values, mask, scale)
    row.on_attention(probs)
    return z
