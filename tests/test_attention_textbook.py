"""Attention as a textbook (issue 27, step 3): ``attention.attention`` is the formula, and every
faster path (the fused kernel, batched rows, sliding windows, T5's bias) is tested equal to it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from explorer.model import attention_kernels
from explorer.model.attention import attention, causal_mask
from explorer.model.cache import LayerKV

torch.manual_seed(0)
ROOT = Path(__file__).resolve().parents[1]


def by_hand(q, k, v, mask=None, scale=None, bias=None):
    """The formula one query head at a time, a loop a learner could do on paper."""
    heads, kv_heads = q.shape[1], k.shape[1]
    out = torch.empty_like(q)
    for b in range(q.shape[0]):
        for h in range(heads):
            g = h // (heads // kv_heads)  # the key/value head this query head reads
            scores = q[b, h] @ k[b, g].T * (scale or 1 / math.sqrt(q.shape[-1]))  # (Tq, Tk)
            if bias is not None:
                scores = scores + bias[0, h]
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            out[b, h] = scores.softmax(-1) @ v[b, g]
    return out


def qkv(batch=2, heads=6, kv_heads=2, tq=7, tk=7, hd=8):
    return torch.randn(batch, heads, tq, hd), torch.randn(batch, kv_heads, tk, hd), torch.randn(batch, kv_heads, tk, hd)


def test_the_formula_is_written_first_in_the_order_it_is_read():
    head = (ROOT / "explorer/model/attention.py").read_text().splitlines()[:60]
    text = "\n".join(head)
    assert "def attention(" in text
    body = text[text.index("def attention(") :]
    order = ["repeat_kv(k", "q @ k.transpose(-2, -1)", "scores + bias", "masked_fill(~mask", "softmax(", "probs @ v"]
    places = [body.index(step) for step in order]
    assert places == sorted(places), places


@pytest.mark.parametrize("kv_heads", [6, 2, 1])
@pytest.mark.parametrize("with_bias", [False, True])
def test_the_formula_is_the_formula(kv_heads, with_bias):
    q, k, v = qkv(kv_heads=kv_heads)
    mask = causal_mask(7, 7)
    bias = torch.randn(1, 6, 7, 7) if with_bias else None
    z, probs = attention(q, k, v, mask, 0.3, bias)
    torch.testing.assert_close(z, by_hand(q, k, v, mask, 0.3, bias), atol=1e-5, rtol=0)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 6, 7))
    assert (probs[..., ~mask] == 0).all()


# (kv heads, sliding window, T5's bias, queries): a whole pass, and a cached step (the newest
# query over every key); a relative bias and a sliding window never meet in one model.
FUSED_CASES = [
    (kv, window, bias, tq) for kv in (6, 2) for window in (None, 3) for bias in (False, True) for tq in (7, 1)
    if not (bias and window)
]  # fmt: skip


@pytest.mark.parametrize(("kv_heads", "window", "with_bias", "tq"), FUSED_CASES)
def test_the_fused_kernel_equals_the_formula(kv_heads, window, with_bias, tq):
    q, k, v = qkv(kv_heads=kv_heads, tq=tq, tk=7)
    mask = causal_mask(tq, 7, window=window)
    bias = torch.randn(1, 6, tq, 7) if with_bias else None
    expected, _ = attention(q, k, v, mask, None, bias)
    # What MultiHeadAttention passes: no mask for a cached step unless a window hides keys.
    passed = None if tq == 1 and window is None else mask
    got = attention_kernels.fused(q, k, v, passed, None, bias, window)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("window", [None, 4])
def test_batched_rows_equal_the_formula_row_by_row(window):
    """Each row is a session's cached step over its own cache, of its own length."""
    lengths = [3, 9, 6]
    q = torch.randn(3, 6, 1, 8)
    rows = [LayerKV(torch.randn(1, 2, n, 8), torch.randn(1, 2, n, 8)) for n in lengths]
    got = attention_kernels.rows(q, rows, 0.25, window)
    for b, (row, n) in enumerate(zip(rows, lengths, strict=True)):
        mask = causal_mask(1, n, window=window)
        expected, _ = attention(q[b : b + 1], row.keys, row.values, mask, 0.25)
        torch.testing.assert_close(got[b : b + 1], expected, atol=1e-5, rtol=0)
