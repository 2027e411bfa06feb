"""Multi-head attention: one module for causal self-attention and for cross-attention.

The two differ only in where keys and values come from. Self-attention projects them
from the same sequence as the queries and hides the future with a causal mask;
cross-attention projects them from the encoder output (the "memory") and masks nothing,
because the whole source sentence is known before decoding starts.

Keys and values are made by ``project_kv`` and passed to ``forward`` as a ``LayerKV``,
so the same ``forward`` serves a whole-sequence pass (keys of every position) and a
cached step (keys from the cache plus the one new position).

The attention itself is ``eager_attention``: softmax(q kᵀ/√d + mask) v, written out. A pass
that neither keeps nor changes the scores or probabilities runs PyTorch's fused kernel
instead, which computes the same without ever materialising the (queries x keys) matrix.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .batch import RowsKV
from .cache import LayerKV
from .config import ModelConfig
from .norms import RMSNorm
from .positions import rotate
from .taps import Tap, current_run


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


def attention_scores(
    q: torch.Tensor,
    keys: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """q kᵀ / √d, with -inf where the mask hides a key: (B, heads, Tq, Tk), before softmax.

    q is (B, heads, Tq, hd); keys are (B, kv_heads, Tk, hd), with kv_heads dividing heads
    (grouped-query attention: query heads g*share .. g*share+share-1 all read key head g);
    mask is (Tq, Tk), True where a query may look; ``scale`` replaces 1/√d (ModelConfig.score_scale);
    ``bias`` (1 or B, heads, Tq, Tk) is added to the scores (T5's relative positions).
    """
    batch, n_heads, n_queries, hd = q.shape
    n_kv_heads = keys.shape[1]
    # Stack the queries of the heads that share a key head on the query axis: no key copies.
    q_grouped = q.reshape(batch, n_kv_heads, (n_heads // n_kv_heads) * n_queries, hd)  # (B, kv, share*Tq, hd)
    scale = hd**-0.5 if scale is None else scale
    scores = (q_grouped @ keys.transpose(-2, -1)) * scale  # (B, kv, share*Tq, Tk)
    scores = scores.view(batch, n_heads, n_queries, -1)  # (B, heads, Tq, Tk)
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        # The mask goes on the scores, before softmax: exp(-inf) = 0, so the future gets
        # exactly zero weight and every row still sums to one.
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores


def attention_weights(
    q: torch.Tensor,
    keys: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(q kᵀ / √d + mask): (B, heads, Tq, Tk) probabilities, every row summing to one.

    The session computes a layer's attention here when a view asks for it (from the queries and
    keys the model used).
    """
    return attention_scores(q, keys, mask, scale, bias).softmax(dim=-1)


def _unchanged(x: torch.Tensor) -> torch.Tensor:
    return x


def eager_attention(
    q: torch.Tensor,  # (B, heads, Tq, hd)
    keys: torch.Tensor,  # (B, kv_heads, Tk, hd)
    values: torch.Tensor,  # (B, kv_heads, Tk, hd)
    mask: torch.Tensor | None = None,  # (Tq, Tk), True where a query may look
    tap_scores: Callable[[torch.Tensor], torch.Tensor] = _unchanged,
    tap_probs: Callable[[torch.Tensor], torch.Tensor] = _unchanged,
    scale: float | None = None,
    bias: torch.Tensor | None = None,  # (1, heads, Tq, Tk), added to the scores
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ/√d + mask) v. Returns each head's output (B, heads, Tq, hd) and the
    probabilities (B, heads, Tq, Tk); the scores and probabilities pass through the given taps."""
    batch, n_heads, n_queries, hd = q.shape
    n_kv_heads = keys.shape[1]
    scores = tap_scores(attention_scores(q, keys, mask, scale, bias))  # (B, heads, Tq, Tk)
    probs = tap_probs(scores.softmax(dim=-1))
    # A key/value head serves n_heads / n_kv_heads query heads: their rows share one product.
    grouped = probs.reshape(batch, n_kv_heads, (n_heads // n_kv_heads) * n_queries, -1)  # (B, kv, share*Tq, Tk)
    z = (grouped @ values).view(batch, n_heads, n_queries, hd)  # (B, heads, Tq, hd)
    return z, probs


class MultiHeadAttention(nn.Module):
    def __init__(self, config: ModelConfig, window: int | None = None) -> None:
        super().__init__()
        d, hd = config.d_model, config.head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, hd
        self.window, self.scale = window, config.score_scale  # window: a sliding layer's reach (causal only)
        self.share = config.queries_per_kv_head  # query heads per key/value head
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
        self.k = Tap("qk")  # (B, kv_heads, Tk, hd), after rotary; a cached step: the whole cache
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
        kv: LayerKV | RowsKV,
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
        if isinstance(kv, RowsKV):  # (no relative bias here: Decoder.position_bias refuses batched positions)
            z = self.z(self._attend_rows(self.q(q), kv))  # (B, heads, 1, hd)
            return self.out(self.o_proj(z.transpose(1, 2).reshape(batch, n_queries, self.n_heads * self.head_dim)))
        q, keys, values = self.q(q), self.k(kv.keys), self.v(kv.values)
        mask = self._mask(n_queries, kv.length, x_q.device) if causal else None  # (Tq, Tk)
        run = current_run()
        if run is not None and (run.touches(self.scores) or run.touches(self.probs)):
            z, _ = eager_attention(q, keys, values, mask, self.scores, self.probs, self.scale, bias)
        else:  # PyTorch's fused kernel: the same numbers, no (Tq x Tk) matrix in memory
            if n_queries == 1 and mask is not None:  # a cached step of a sliding layer: its last keys only
                keys, values, mask = keys[:, :, -self.window :], values[:, :, -self.window :], None
            if bias is not None:  # a float mask is added to the scores: the bias, -inf where hidden
                mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
            z = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=mask, scale=self.scale, enable_gqa=self.share > 1
            )  # fmt: skip
        z = self.z(z)  # (B, heads, Tq, hd)
        return self.out(self.o_proj(z.transpose(1, 2).reshape(batch, n_queries, self.n_heads * self.head_dim)))

    def _mask(self, n_queries: int, n_keys: int, device: torch.device) -> torch.Tensor | None:
        """The causal (and sliding-window) mask, or None where it would hide nothing."""
        if n_queries == 1 and (self.window is None or n_keys <= self.window):
            return None
        return causal_mask(n_queries, n_keys, device, window=self.window)

    def _attend_rows(self, q: torch.Tensor, kv: RowsKV) -> torch.Tensor:
        """One new query per row (B, heads, 1, hd), row b over its own keys: the fused kernel a
        step alone takes, row by row. The k and v taps see this step's new keys and values only
        (the caches differ in length); scores and probabilities are not made here."""
        run = current_run()
        if run is not None and (run.touches(self.scores) or run.touches(self.probs)):
            raise ValueError("a batched step keeps queries and keys; a pass that needs probabilities runs alone")
        if q.shape[2] != 1:
            raise ValueError("a batched step adds one token per row")
        if kv.new_keys is not None:  # self-attention: what this step adds to each cache
            self.k(kv.new_keys)
            self.v(kv.new_values)
        reach = slice(-self.window, None) if self.window else slice(None)  # a sliding layer's last keys
        rows = [
            F.scaled_dot_product_attention(
                q[b : b + 1], row.keys[:, :, reach], row.values[:, :, reach], scale=self.scale,
                enable_gqa=self.share > 1,
            )
            for b, row in enumerate(kv.rows)
        ]  # fmt: skip
        return torch.cat(rows)
