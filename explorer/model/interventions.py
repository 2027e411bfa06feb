"""Interventions: what a pass changes at its taps, to test what the model needs.

    model(ids, interventions=ablate_heads({17: [3, 6]}))  # those two heads contribute nothing
    model(ids, interventions=[ablate_sublayer(5, "mlp")])

Each builder returns ``Intervention`` objects naming the tap they change (trace.py's table). A
head is switched off at ``{stack}.{layer}.{attn}.z``, its output before the output projection
mixes the heads: zeroing it there is exactly removing the head's slice of that projection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from .taps import Intervention, Run

ABLATIONS = ("zero", "mean")
SUBLAYERS = {"attention": "self_attn.out", "mlp": "ffn.out"}


def ablate_heads(
    heads: Mapping[int, Iterable[int]], method: str = "zero", stack: str = "decoder", attention: str = "self_attn"
) -> list[Intervention]:
    """Switch heads off: ``{layer: [head, ...]}``.

    "zero" sets a head's output to zero. "mean" sets it, at each position, to the head's mean
    output over the text up to that position: the head keeps its average contribution but
    carries nothing about this position in particular. (A mean over the whole text would carry
    later tokens into earlier positions, breaking the causal mask; a running mean needs every
    position in the pass, so a session with it runs without the cache.)
    """
    if method not in ABLATIONS:
        raise ValueError(f"method {method!r}: choose one of {', '.join(ABLATIONS)}")
    changes = []
    for layer, chosen in sorted(heads.items()):
        chosen = sorted(set(int(h) for h in chosen))
        if not chosen:
            continue
        change = _zero_heads(chosen) if method == "zero" else _mean_heads(chosen)
        what = f"{method}-ablate {stack} layer {layer} {attention} heads {', '.join(map(str, chosen))}"
        changes.append(Intervention(f"{stack}.{layer}.{attention}.z", change, what, whole_sequence=method == "mean"))
    return changes


def _zero_heads(heads: list[int]):
    def change(z: torch.Tensor, run: Run) -> torch.Tensor:  # z: (B, heads, Tq, hd)
        _check_heads(z, heads)
        z = z.clone()
        z[:, heads] = 0
        return z

    return change


def _mean_heads(heads: list[int]):
    def change(z: torch.Tensor, run: Run) -> torch.Tensor:  # z: (B, heads, Tq, hd)
        _check_heads(z, heads)
        if run.start:
            raise ValueError("mean ablation needs every position in the pass; run without the cache")
        counts = torch.arange(1, z.shape[2] + 1, device=z.device, dtype=z.dtype)[:, None]  # (Tq, 1)
        z = z.clone()
        z[:, heads] = z[:, heads].cumsum(dim=2) / counts  # position t: the mean of positions 0..t
        return z

    return change


def _check_heads(z: torch.Tensor, heads: list[int]) -> None:
    if heads[0] < 0 or heads[-1] >= z.shape[1]:
        raise ValueError(f"heads {heads}: this layer has heads 0 to {z.shape[1] - 1}")


def ablate_sublayer(layer: int, sublayer: str, stack: str = "decoder") -> Intervention:
    """Switch a layer's attention ("attention") or feed-forward ("mlp") off: its output, added to
    the residual stream, becomes zero."""
    if sublayer not in SUBLAYERS:
        raise ValueError(f"sublayer {sublayer!r}: choose one of {', '.join(SUBLAYERS)}")

    def change(x: torch.Tensor, run: Run) -> torch.Tensor:
        return torch.zeros_like(x)

    return Intervention(f"{stack}.{layer}.{SUBLAYERS[sublayer]}", change, f"ablate {stack} layer {layer} {sublayer}")


def position_axis(tap: str) -> int:
    """Which axis of the tap's tensor is the position: 1 for (B, T, ...), 2 for per-head (B, heads, T, ...)."""
    if tap.endswith((".k", ".v", ".scores", ".probs")):
        raise ValueError(
            f"{tap} cannot be patched by position (keys, values and attention cover the cache, not the pass's "
            "positions); patch the residual stream, a sublayer's output, or the heads' outputs (.z) instead"
        )
    return 2 if tap.endswith((".q", ".z")) else 1


def patch_values(tap: str, positions: Iterable[int], values: torch.Tensor, description: str = "") -> Intervention:
    """Put ``values`` (the tap's tensor from a whole-sequence pass of another run) in place of the
    tap's tensor at ``positions`` (absolute positions; a cached step patches its own position)."""
    axis = position_axis(tap)
    positions = sorted(set(int(p) for p in positions))
    if positions and (positions[0] < 0 or positions[-1] >= values.shape[axis]):
        raise ValueError(f"positions {positions}: the source run has positions 0 to {values.shape[axis] - 1}")

    def change(x: torch.Tensor, run: Run) -> torch.Tensor:
        here = [p for p in positions if run.start <= p < run.start + x.shape[axis]]
        if not here:
            return x
        if values.shape[:axis] != x.shape[:axis] or values.shape[axis + 1 :] != x.shape[axis + 1 :]:
            raise ValueError(f"patch {tap}: the source's shape {tuple(values.shape)} does not fit {tuple(x.shape)}")
        x = x.clone()
        index = torch.tensor(here, device=x.device)
        x.index_copy_(axis, index - run.start, values.index_select(axis, index).to(x.dtype))
        return x

    return Intervention(tap, change, description or f"patch {tap} at positions {positions}")
