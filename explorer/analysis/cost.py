"""The loaded model's architecture, and what one step costs in arithmetic and memory.

FLOPs count a multiply-add as two. A step with the cache processes one new position over
T keys; without the cache it reprocesses all T positions (the mask hides the future, but
the products are still computed, so they are counted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from explorer.model import ModelConfig

NORM_NAMES = {"layer": "LayerNorm", "rms": "RMSNorm"}
POSITION_NAMES = {
    "learned": "learned position vectors, added to the token vectors",
    "sinusoidal": "fixed sinusoidal position vectors, added to the token vectors",
    "rope": "rotary (RoPE): queries and keys rotated by position inside attention",
    "relative": "relative (T5): no position vectors; each head adds a learned bias to a score by distance",
}


def parameter_count(model: torch.nn.Module) -> int:
    """Parameters counted once even when shared (tied embeddings)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def sharing_name(config: ModelConfig) -> str:
    """What a model's query heads sharing key/value heads is called."""
    if config.n_kv_heads == 1:
        return "multi-query attention"
    return "grouped-query attention" if config.n_kv_heads < config.n_heads else "multi-head attention"


def architecture_rows(config: ModelConfig, parameters: int) -> list[tuple[str, str]]:
    """(property, value) rows describing the model, in the order a learner reads them."""
    c = config
    kind = "encoder-decoder (a translator)" if c.is_encoder_decoder else "decoder-only"
    grouped = (
        f"{c.n_kv_heads} (each shared by {c.queries_per_kv_head} query heads: {sharing_name(c)})"
        if c.queries_per_kv_head > 1
        else f"{c.n_kv_heads} (one per query head)"
    )
    gate = "GeGLU" if c.activation.startswith("gelu") else "SwiGLU" if c.activation == "silu" else "GLU"
    ffn = f"{c.d_ff} wide, {c.activation}" + (f", gated ({gate}: act(gate) x up)" if c.gated_ffn else "")
    placement = "pre-norm: x + f(norm(x))" if c.norm_first else "post-norm: norm(x + f(x))"
    rows = [
        ("kind", f"{kind}, {c.family} family"),
        ("parameters", f"{parameters / 1e6:.1f} M"),
        ("decoder layers", str(c.n_layers)),
    ]
    if c.is_encoder_decoder:
        rows.append(("encoder layers", str(c.n_encoder_layers)))
    heads = f"{c.n_heads} of {c.head_dim} dimensions" + (", each query and key RMS-normalised" if c.qk_norm else "")
    rows += [
        ("residual width (d_model)", str(c.d_model)),
        ("attention heads", heads),
        ("key/value heads", grouped),
        ("feed-forward", ffn),
        ("norm", f"{NORM_NAMES[c.norm]}, {placement}" + (", and a final norm" if c.final_norm else "")),
    ]
    if c.parallel_residual:
        rows.append(("sublayers", "side by side: x + attention(norm1(x)) + feed-forward(norm2(x))"))
    if c.sandwich_norm:
        rows.append(("sublayers", "a norm before and after each: x + norm2(f(norm1(x)))"))
    if c.output_scale != 1.0:
        rows.append(("output", f"the last residual × {c.output_scale:.4g} (1/√{c.d_model}) before the output head"))
    if c.attn_scale is not None:
        usual = c.head_dim**-0.5
        said = "the usual 1/√" if math.isclose(c.attn_scale, usual) else "not 1/√"
        rows.append(("score scale", f"q·k × {c.attn_scale:.4g} ({said}{c.head_dim} = {usual:.4g})"))
    if c.sliding_window:
        rows.append(("attention reach", reach_text(c)))
    if c.embedding_norm:
        rows.append(("embeddings", "token and position vectors added, then normed, in each stack"))
    rows += [
        ("positions", positions_text(c)),
        ("context window", f"{c.max_positions:,} positions"),
        ("vocabulary", f"{c.vocab_size:,} tokens"),
        ("output head", "tied to the token embeddings" if c.tie_embeddings else "its own weights"),
    ]
    return rows


def reach_text(c: ModelConfig) -> str:
    """Which layers read a sliding window of the past and which read all of it."""
    local = [i for i in range(c.n_layers) if c.window_of(i) is not None]
    if len(local) == c.n_layers:
        return f"every layer: a sliding window of the last {c.sliding_window:,} positions"
    others = c.n_layers - len(local)
    return (
        f"{len(local)} local layers ({layer_list(local)}) read the last {c.sliding_window:,} positions; "
        f"the {others} global ones, every earlier position"
    )


def layer_list(layers: list[int]) -> str:
    return ", ".join(map(str, layers)) if len(layers) <= 8 else f"{', '.join(map(str, layers[:8]))}, …"


def positions_text(c: ModelConfig) -> str:
    text = POSITION_NAMES[c.positions]
    if c.positions == "relative":
        text += f" ({c.relative_buckets} buckets, the same past {c.relative_max_distance} positions)"
    if c.positions == "rope":
        text += f" (theta {c.rope_theta:g}"
        text += f"; {c.rope_local_theta:g} in the local layers)" if c.rope_local_theta else ")"
        if c.rotary_dim < c.head_dim:
            text += f", on {c.rotary_dim} of each head's {c.head_dim} numbers"
    return text


@dataclass
class StepCost:
    attention_projections: int  # q, k, v and output projections (self and cross)
    attention_scores: int  # q.k products and the weighted sums of values
    feed_forward: int
    output_head: int

    @property
    def attention(self) -> int:
        return self.attention_projections + self.attention_scores

    @property
    def total(self) -> int:
        return self.attention + self.feed_forward + self.output_head


def step_flops(config: ModelConfig, positions: int, use_cache: bool, source_positions: int = 0) -> StepCost:
    """FLOPs of the step that processed position ``positions - 1`` (a sequence of ``positions``).

    With the cache one query row is computed over ``positions`` keys; without it every row
    is recomputed. The output head runs on the last position only, as the session's does.
    A translator's cross-attention keys and values of the source are cached after the first
    step; without the cache they are recomputed every step.
    """
    c = config
    d, hd, heads, kv = c.d_model, c.head_dim, c.n_heads, c.n_kv_heads
    rows = 1 if use_cache else positions
    per_layer_proj = 2 * rows * d * heads * hd * 2 + 2 * rows * d * kv * hd * 2  # q and o; k and v
    # q.k^T and weights @ v over the keys each row reads
    self_scores = sum(4 * heads * keys_read(c.window_of(i), positions, rows) * hd for i in range(c.n_layers))
    per_layer_cross_scores = 0
    if c.is_encoder_decoder:
        per_layer_proj += 2 * rows * d * heads * hd * 2  # cross q and o
        if not use_cache:
            per_layer_proj += 2 * source_positions * d * kv * hd * 2  # cross k and v of the source
        per_layer_cross_scores = 4 * heads * rows * source_positions * hd
    per_layer_ffn = 2 * rows * d * c.d_ff * (3 if c.gated_ffn else 2)
    return StepCost(
        attention_projections=c.n_layers * per_layer_proj,
        attention_scores=self_scores + c.n_layers * per_layer_cross_scores,
        feed_forward=c.n_layers * per_layer_ffn,
        output_head=2 * d * c.vocab_size,
    )


def keys_read(window: int | None, positions: int, rows: int) -> int:
    """How many (query, key) pairs the last ``rows`` of ``positions`` positions score, as the
    model computes them: a whole pass scores every pair and masks the future (and, in a
    sliding layer, what is too far back); a cached step of a sliding layer reads its window only."""
    if rows == 1 and window is not None:
        return min(positions, window)
    return rows * positions


def kv_cache_bytes(config: ModelConfig, positions: int, bytes_per_value: int, source_positions: int = 0) -> int:
    """2 (keys and values) x layers x kv_heads x head_dim x positions x bytes per value,
    plus a translator's cached cross-attention keys and values of the source."""
    c = config
    per_position = 2 * c.n_layers * c.n_kv_heads * c.head_dim * bytes_per_value
    return per_position * (positions + source_positions)
