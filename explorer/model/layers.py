"""Feed-forward blocks and the encoder and decoder layers built from them.

A layer is a list of sublayers, each wrapped in a residual connection and a norm:

* pre-norm (GPT-2, Llama):       x + sublayer(norm(x))
* post-norm (2017 paper, Marian): norm(x + sublayer(x))
* "sandwich" (Gemma 3):           x + norm2(sublayer(norm1(x)))

A decoder layer has masked self-attention, then (encoder-decoder models only)
cross-attention over the encoder output, then a feed-forward block.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .cache import KVCache
from .config import ModelConfig
from .norms import make_norm
from .taps import Tap

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
    "relu": F.relu,
    "silu": F.silu,  # also called swish
}


class FeedForward(nn.Module):
    """down(act(up(x))), applied to every position on its own."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.up_proj = nn.Linear(config.d_model, config.d_ff, bias=config.ffn_bias)
        self.down_proj = nn.Linear(config.d_ff, config.d_model, bias=config.ffn_bias)
        self.act = ACTIVATIONS[config.activation]
        self.input, self.hidden, self.out = Tap("sublayers"), Tap("sublayers"), Tap("sublayers")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.hidden(self.act(self.up_proj(self.input(x))))  # (B, T, d_ff)
        return self.out(self.down_proj(hidden))


class GatedFeedForward(nn.Module):
    """SwiGLU: down(act(gate(x)) * up(x)), the gate deciding how much of each unit passes."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.d_model, config.d_ff, bias=config.ffn_bias)
        self.up_proj = nn.Linear(config.d_model, config.d_ff, bias=config.ffn_bias)
        self.down_proj = nn.Linear(config.d_ff, config.d_model, bias=config.ffn_bias)
        self.act = ACTIVATIONS[config.activation]
        self.input, self.hidden, self.out = Tap("sublayers"), Tap("sublayers"), Tap("sublayers")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input(x)
        hidden = self.hidden(self.act(self.gate_proj(x)) * self.up_proj(x))  # (B, T, d_ff)
        return self.out(self.down_proj(hidden))


def make_feed_forward(config: ModelConfig) -> nn.Module:
    return GatedFeedForward(config) if config.gated_ffn else FeedForward(config)


def with_residual(
    x: torch.Tensor,
    norm: nn.Module,
    sublayer: Callable[[torch.Tensor], torch.Tensor],
    norm_first: bool,
    norm_after: nn.Module | None = None,  # the sandwich's second norm, on the sublayer's output
) -> torch.Tensor:
    if norm_first:
        out = sublayer(norm(x))
        return x + (norm_after(out) if norm_after is not None else out)
    return norm(x + sublayer(x))


def sandwich_norm(config: ModelConfig) -> nn.Module | None:
    return make_norm(config.norm, config.d_model, config.norm_eps) if config.sandwich_norm else None


class EncoderLayer(nn.Module):
    """Unmasked self-attention then feed-forward: every source token sees every other."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm_first = config.norm_first
        self.self_attn = MultiHeadAttention(config)
        self.self_attn_norm = make_norm(config.norm, config.d_model, config.norm_eps)
        self.ffn = make_feed_forward(config)
        self.ffn_norm = make_norm(config.norm, config.d_model, config.norm_eps)
        self.resid_after_attn, self.resid_after_ffn = Tap("residual"), Tap("residual")  # (B, S, d_model)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, S, d_model); ``bias`` (1, heads, S, S): T5's relative positions, or None."""

        def attend(h: torch.Tensor) -> torch.Tensor:
            return self.self_attn(h, self.self_attn.project_kv(h), causal=False, bias=bias)

        x = self.resid_after_attn(with_residual(x, self.self_attn_norm, attend, self.norm_first))
        return self.resid_after_ffn(with_residual(x, self.ffn_norm, self.ffn, self.norm_first))


class DecoderLayer(nn.Module):
    """Masked self-attention (over a sliding window in a "sliding" layer), optional
    cross-attention, feed-forward."""

    def __init__(self, config: ModelConfig, index: int = 0) -> None:
        super().__init__()
        self.norm_first, self.parallel_residual = config.norm_first, config.parallel_residual
        self.self_attn = MultiHeadAttention(config, window=config.window_of(index))
        self.self_attn_norm = make_norm(config.norm, config.d_model, config.norm_eps)
        self.self_attn_norm_after, self.ffn_norm_after = sandwich_norm(config), sandwich_norm(config)
        self.cross_attn: MultiHeadAttention | None = None
        if config.is_encoder_decoder:
            self.cross_attn = MultiHeadAttention(config)
            self.cross_attn_norm = make_norm(config.norm, config.d_model, config.norm_eps)
            self.resid_after_cross = Tap("residual")
        self.ffn = make_feed_forward(config)
        self.ffn_norm = make_norm(config.norm, config.d_model, config.norm_eps)
        self.resid_after_attn, self.resid_after_ffn = Tap("residual"), Tap("residual")  # (B, T, d_model)

    def forward(
        self,
        x: torch.Tensor,  # (B, T, d_model): the new positions only, when a cache is used
        *,
        index: int,
        rotary: tuple[torch.Tensor, torch.Tensor] | None,  # (cos, sin) of x's positions, or None
        cache: KVCache | None,
        memory: torch.Tensor | None,  # (B, S, d_model) encoder output, or None
        causal: bool,
        bias: torch.Tensor | None = None,  # (1, heads, T, keys): T5's relative positions, or None
    ) -> torch.Tensor:
        def self_attend(h: torch.Tensor) -> torch.Tensor:
            kv = self.self_attn.project_kv(h, rotary)
            if cache is not None:  # keys of the past come from the cache, the new ones join it
                kv = cache.append(index, kv.keys, kv.values)
            return self.self_attn(h, kv, causal=causal, rotary=rotary, bias=bias)

        def cross_attend(h: torch.Tensor) -> torch.Tensor:
            kv = cache.cross_attn[index] if cache is not None else None
            if kv is None:  # computed once per source sentence when a cache is used
                kv = self.cross_attn.project_kv(memory)
                if cache is not None:
                    cache.cross_attn[index] = kv
            return self.cross_attn(h, kv, causal=False)

        if self.parallel_residual:  # both sublayers read the same x; the sum after attention is a tap only
            attended = self.resid_after_attn(x + self_attend(self.self_attn_norm(x)))
            return self.resid_after_ffn(attended + self.ffn(self.ffn_norm(x)))
        x = self.resid_after_attn(
            with_residual(x, self.self_attn_norm, self_attend, self.norm_first, self.self_attn_norm_after)
        )
        if self.cross_attn is not None:
            x = self.resid_after_cross(with_residual(x, self.cross_attn_norm, cross_attend, self.norm_first))
        return self.resid_after_ffn(with_residual(x, self.ffn_norm, self.ffn, self.norm_first, self.ffn_norm_after))
