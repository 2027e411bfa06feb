"""Attention, as the formula reads: softmax(q kᵀ · scale + bias, masked) v.

``attention`` below is the whole of it, one line per step of the formula. Everything else in
this file is where q, k and v come from (``MultiHeadAttention``: projections, rotary positions,
the cache) and which keys a query may see (``causal_mask``). A pass that neither keeps nor
changes the scores or probabilities runs a faster path (``attention_kernels``: PyTorch's fused
kernel, batched rows, sliding windows); the tests check each equals ``attention``.

Self-attention and cross-attention differ only in where the keys and values come from: the same
sequence as the queries, with the future masked; or the encoder's output (the "memory"), with
nothing masked, because the whole source is known before decoding starts.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from . import attention_kernels
from .batch import PaddedKV, RowsKV, SplitKV
from .cache import LayerKV
from .config import ModelConfig
from .norms import RMSNorm
from .positions import rotate
from .taps import Tap, current_run


def attention(
    q: torch.Tensor,  # (B, heads, Tq, hd)
    k: torch.Tensor,  # (B, kv_heads, Tk, hd)
    v: torch.Tensor | None,  # (B, kv_heads, Tk, hd); None: the probabilities alone
    mask: torch.Tensor | None = None,  # (Tq, Tk), True where a query may look
    scale: float | None = None,  # 1/√hd unless the model says otherwise
    bias: torch.Tensor | None = None,  # (1 or B, heads, Tq, Tk): T5's relative positions
    tap_scores: Callable[[torch.Tensor], torch.Tensor] = lambda scores: scores,
    tap_probs: Callable[[torch.Tensor], torch.Tensor] = lambda probs: probs,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Each head's output (B, heads, Tq, hd) and the probabilities (B, heads, Tq, Tk)."""
    k, v = repeat_kv(k, q.shape[1]), repeat_kv(v, q.shape[1])  # (B, heads, Tk, hd): GQA heads share k, v
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, heads, Tq, Tk)
    if bias is not None:
        scores = scores + bias
    if mask is not None:  # before the softmax: exp(-inf) = 0, the hidden keys get exactly zero weight
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = tap_probs(tap_scores(scores).softmax(dim=-1))  # (B, heads, Tq, Tk): each row sums to 1
    return (None if v is None else probs @ v), probs  # (B, heads, Tq, hd): the values, weighted


def repeat_kv(x: torch.Tensor | None, n_heads: int) -> torch.Tensor | None:
    """(B, kv_heads, T, hd) -> (B, n_heads, T, hd): grouped-query attention gives each key/value
    head to n_heads / kv_heads query heads in a row (query heads 0-2 read kv head 0, ...)."""
    if x is None or x.shape[1] == n_heads:
        return x
    return x.repeat_interleave(n_heads // x.shape[1], dim=1)


def causal_mask(
    n_queries: int,
    n_keys: int,
    device: torch.device | None = None,
    first_query: int | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """(queries, keys) boolean mask, True where a query may look.

    The queries stand at positions ``first_query`` .. ``first_query + n_queries - 1`` (by
    default the last ``n_queries`` of ``n_keys`` positions), and each may see every key up to
    and including its own position; with a sliding ``window``, only the last ``window`` of them.
    """
    offset = n_keys - n_queries if first_query is None else first_query
    query_pos = torch.arange(n_queries, device=device)[:, None] + offset
    key_pos = torch.arange(n_keys, device=device)[None, :]
    mask = key_pos <= query_pos
    if window is not None:
        mask &= key_pos > query_pos - window
    return mask


def attention_weights(
    q: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor | None = None, scale: float | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:  # fmt: skip
    """The probabilities alone, (B, heads, Tq, Tk): what the session computes when a view asks
    for a layer's attention (from the queries and keys the model used)."""
    return attention(q, keys, None, mask, scale, bias)[1]


class MultiHeadAttention(nn.Module):
    def __init__(self, config: ModelConfig, window: int | None = None) -> None:
        super().__init__()
        d, hd = config.d_model, config.head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, hd
        self.window, self.scale = window, config.score_scale  # window: a sliding layer's reach (causal only)
        self.q_proj = nn.Linear(d, config.n_heads * hd, bias=config.qkv_bias)
        self.k_proj = nn.Linear(d, config.n_kv_heads * hd, bias=config.qkv_bias)
        self.v_proj = nn.Linear(d, config.n_kv_heads * hd, bias=config.qkv_bias)
        self.o_proj = nn.Linear(config.n_heads * hd, d, bias=config.out_bias)
        # Qwen3 normalises each head's query and key (over its head_dim numbers) before rotary:
        # the scores' scale then no longer grows with the residual stream's.
        self.q_norm = RMSNorm(hd, config.norm_eps) if config.qk_norm else nn.Identity()
        self.k_norm = RMSNorm(hd, config.norm_eps) if config.qk_norm else nn.Identity()
        self.input = Tap("sublayers")  # (B, Tq, d_model): what the queries are made from
        self.q = Tap("qk")  # (B, heads, Tq, hd), after rotary
        self.k = Tap("qk")  # (B, kv_heads, Tk, hd), after rotary; a cached step: the whole cache (or its new keys)
        self.v = Tap("qkv")  # (B, kv_heads, Tk, hd)
        self.scores = Tap("scores")  # (B, heads, Tq, Tk), before softmax, -inf where masked
        self.probs = Tap("attention")  # (B, heads, Tq, Tk)
        self.z = Tap("heads")  # (B, heads, Tq, hd): each head's output, before o_proj mixes them
        self.out = Tap("sublayers")  # (B, Tq, d_model)

    def _split_heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, n_heads, self.head_dim).transpose(1, 2)  # (B, heads, T, hd)

    def project_kv(self, x_kv: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None = None) -> LayerKV:
        """Keys and values of x_kv (batch, T, d_model); rotary models rotate the keys."""
        keys = self.k_norm(self._split_heads(self.k_proj(x_kv), self.n_kv_heads))  # (B, kv_heads, T, hd)
        values = self._split_heads(self.v_proj(x_kv), self.n_kv_heads)  # (B, kv_heads, T, hd)
        if rotary is not None:
            keys = rotate(keys, rotary)
        return LayerKV(keys, values)

    def forward(
        self,
        x_q: torch.Tensor,
        kv: LayerKV | RowsKV | PaddedKV | SplitKV,
        *,
        causal: bool,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend from x_q (batch, Tq, d_model) over ``kv``; returns (batch, Tq, d_model).
        ``bias`` (1, heads, Tq, Tk) is added to the scores (T5's relative positions).

        With ``causal``, the queries are taken to be the last Tq positions of the Tk keys.
        A single new query (a cached step) needs no mask, every key being its past or itself,
        unless a sliding window hides the oldest keys.
        ``RowsKV``: the rows are different sessions' steps, each over its own cache (batch.py).
        """
        batch, n_queries, _ = x_q.shape
        q = self.q_norm(self._split_heads(self.q_proj(self.input(x_q)), self.n_heads))  # (B, heads, Tq, hd)
        if rotary is not None:  # (cos, sin) of the query positions
            q = rotate(q, rotary)
        if isinstance(
            kv, RowsKV | PaddedKV | SplitKV
        ):  # (no relative bias: Decoder.position_bias refuses batched positions)
            z = self.z(self._attend_batch(self.q(q), kv))  # (B, heads, 1, hd)
            return self.out(self.o_proj(z.transpose(1, 2).reshape(batch, n_queries, self.n_heads * self.head_dim)))
        if kv.new_keys is None:
            q, keys, values = self.q(q), self.k(kv.keys), self.v(kv.values)
        else:  # a cache under a policy holds its keys in slots, out of order: the taps see the new ones
            q, keys, values = self.q(q), kv.keys, kv.values
            self.k(kv.new_keys), self.v(kv.new_values)
        mask = self._mask(n_queries, kv.length, x_q.device) if causal else None  # (Tq, Tk)
        window = self.window
        if kv.visible is not None:  # a sliding layer over a policy's slots: its window by position, per head
            mask, window = repeat_kv(kv.visible, self.n_heads), None  # (1, heads, 1, Tk)
        run = current_run()
        wants_probs = kv.on_attention is not None  # a cache policy that scores keys by attention (H2O)
        if wants_probs or (run is not None and (run.touches(self.scores) or run.touches(self.probs))):
            z, probs = attention(q, keys, values, mask, self.scale, bias, self.scores, self.probs)  # the formula
            if wants_probs:
                kv.on_attention(probs)
        else:  # the same numbers, no (Tq x Tk) matrix in memory
            z = attention_kernels.fused(q, keys, values, mask, self.scale, bias, window)
        z = self.z(z)  # (B, heads, Tq, hd)
        return self.out(self.o_proj(z.transpose(1, 2).reshape(batch, n_queries, self.n_heads * self.head_dim)))

    def _mask(self, n_queries: int, n_keys: int, device: torch.device) -> torch.Tensor | None:
        """The causal (and sliding-window) mask, or None where it would hide nothing."""
        if n_queries == 1 and (self.window is None or n_keys <= self.window):
            return None
        return causal_mask(n_queries, n_keys, device, window=self.window)

    def _attend_batch(self, q: torch.Tensor, kv: RowsKV | PaddedKV | SplitKV) -> torch.Tensor:
        """One new query per row (B, heads, 1, hd), row b over its own keys: the padded caches in
        one fused call under their length mask, or (a translator's sources) row by row
        (``attention_kernels.rows``). The k and v taps see this step's new keys and values only
        (the caches differ in length); scores and probabilities are not made here."""
        run = current_run()
        if run is not None and (run.touches(self.scores) or run.touches(self.probs)):
            raise ValueError("a batched step keeps queries and keys; a pass that needs probabilities runs alone")
        if kv.new_keys is not None:  # self-attention: what this step adds to each cache
            self.k(kv.new_keys)
            self.v(kv.new_values)
        if isinstance(kv, SplitKV):
            return self._attend_split(q, kv)
        if isinstance(kv, PaddedKV):
            return attention_kernels.fused(q, kv.keys, kv.values, kv.mask(self.window), self.scale)
        return attention_kernels.rows(q, kv.rows, self.scale, self.window, formula=attention)

    def _attend_split(self, q: torch.Tensor, kv: SplitKV) -> torch.Tensor:
        """(B, heads, 1, hd): the rows in the store in one fused call, the others row by row."""
        z = torch.empty_like(q)
        if kv.paged:
            padded = kv.padded
            z[kv.paged] = attention_kernels.fused(
                q[kv.paged], padded.keys, padded.values, padded.mask(self.window), self.scale
            )
        z[kv.apart] = attention_kernels.rows(q[kv.apart], kv.own.rows, self.scale, self.window, formula=attention)
        return z
