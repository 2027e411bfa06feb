"""The residual stream at a few positions as a sum of named components, read from one traced pass.

A component is what one part of the model wrote into the stream, as a vector at each position:

* ``embed``: the embedding as the stack starts (token vector, scaled where the family scales it,
  plus the position vector where positions are learned or sinusoidal, normed in BART's way);
* ``L{l}.H{h}``: head h of layer l, its output z_h through its slice of the output projection
  (``W_O[:, h*hd:(h+1)*hd]``); ``L{l}.cross.H{h}`` a translator's cross-attention head;
* ``L{l}.mlp``: layer l's feed-forward output (biases included);
* ``bias``: every attention output bias, and every LayerNorm's beta the stream went through.

A norm is linear once its scale is held at the value it had (RMSNorm: x·w/rms(x); LayerNorm's
centring, x - mean(x), is linear too, its beta joins ``bias``), so every component passes through
a post-norm (Marian, BART) or a sandwich norm (Gemma 3) scaled by the same numbers as the whole.
A parallel residual (GPT-NeoX) adds layer l's heads and its feed-forward to the stream together;
both read the stream before layer l, so neither is a component of layer l's own queries and keys.
The components sum to the stream the model used (tests/test_circuits.py checks it, 1e-4).
An encoder's components (a translator's memory) are named the same, after ``enc.``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from explorer.model.norms import RMSNorm
from explorer.model.trace import Trace


def fixed_norm(
    norm: nn.Module, parts: torch.Tensor, total: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``parts`` (C, P, d) through ``norm`` with its scale held at the value the stream ``total``
    (P, d; by default the sum of the parts) gives it: the transformed parts (C, P, d) and the norm's
    own bias (d,) or None. The transformed parts plus that bias sum to ``norm(parts.sum(0))``."""
    total = parts.sum(0) if total is None else total  # (P, d)
    if isinstance(norm, RMSNorm):
        scale = torch.rsqrt(total.pow(2).mean(-1, keepdim=True) + norm.eps)  # (P, 1)
        return parts * scale * norm.weight, None
    if isinstance(norm, nn.LayerNorm):
        scale = torch.rsqrt(total.var(-1, unbiased=False, keepdim=True) + norm.eps)  # (P, 1)
        centred = parts - parts.mean(-1, keepdim=True)  # centring is linear: each part on its own
        return centred * scale * norm.weight, norm.bias
    if isinstance(norm, nn.Identity):
        return parts, None
    raise TypeError(f"no fixed-scale form for {type(norm).__name__}")


def head_outputs(attn: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """Each head's output through its slice of W_O: z (heads, P, hd) -> (heads, P, d_model)."""
    hd = attn.head_dim
    w_o = attn.o_proj.weight.view(-1, attn.n_heads, hd)  # (d_model, heads, hd)
    return torch.einsum("hpe,dhe->hpd", z, w_o)


class Stream:
    """Components of one stack's stream at ``positions``: ``parts[c]`` (P, d) is named ``names[c]``.
    Parts added are joined into one tensor only when read (a row's walk adds hundreds)."""

    def __init__(self, names: list[str], parts: torch.Tensor, positions: list[int], prefix: str = "") -> None:
        self.names, self.positions, self.prefix = names, positions, prefix  # prefix: "enc." for an encoder
        self._chunks = [parts]  # (C_i, P, d_model) each
        self._pending: tuple[nn.Module, torch.Tensor] | None = None  # a norm ``project`` applies (normed)

    @property
    def parts(self) -> torch.Tensor:
        """(C, P, d_model)"""
        if self._pending is not None:
            raise RuntimeError("a normed stream is read through project()")
        if len(self._chunks) > 1:
            self._chunks = [torch.cat(self._chunks)]
        return self._chunks[0]

    def add(self, names: list[str], parts: torch.Tensor) -> None:
        self.names += [self.prefix + name for name in names]
        self._chunks.append(parts)

    def add_bias(self, bias: torch.Tensor | None) -> None:
        """Add a bias (d,) at every position to the ``bias`` component (made when first needed)."""
        if bias is None:
            return
        name = self.prefix + "bias"
        if name not in self.names:
            self.add(["bias"], torch.zeros_like(self._chunks[0][:1]))
        self.parts[self.names.index(name)] += bias  # parts are the walk's own tensors, never a trace's

    def through(self, norm: nn.Module) -> None:
        """Every part through ``norm`` with its scale held (a post-norm, a final norm)."""
        parts, bias = fixed_norm(norm, self.parts)
        self._chunks = [parts]
        self.add_bias(bias)

    def normed(self, norm: nn.Module) -> Stream:
        """The components of ``norm(stream)`` (a pre-norm sublayer's input), each part through the
        norm with its scale held, a LayerNorm's beta joining ``bias``. Lazy: ``project`` applies the
        norm part by part on the way to a head's smaller space (a row's stream is large)."""
        copy = Stream(list(self.names), self._chunks[0], self.positions, self.prefix)
        copy._chunks, copy._pending = list(self._chunks), (norm, self.total)
        if getattr(norm, "bias", None) is not None and copy.prefix + "bias" not in copy.names:
            copy.add(["bias"], torch.zeros_like(copy._chunks[0][:1]))
        return copy

    def project(self, weight: torch.Tensor) -> torch.Tensor:
        """(C, P, rows) each part (through the pending norm) times ``weight`` (rows, d_model)ᵀ."""
        if self._pending is None:
            return self.parts @ weight.T
        norm, total = self._pending
        out = torch.cat([fixed_norm(norm, chunk, total)[0] @ weight.T for chunk in self._chunks])
        if getattr(norm, "bias", None) is not None:
            out[self.names.index(self.prefix + "bias")] += norm.bias @ weight.T
        return out

    @property
    def total(self) -> torch.Tensor:
        return sum(chunk.sum(0) for chunk in self._chunks)  # (P, d_model)


def _at(trace: Trace, name: str, positions: list[int]) -> torch.Tensor:
    """A recorded (1, T, d) tensor's rows at ``positions``, (P, d); heads (1, H, T, e): (H, P, e)."""
    tensor = trace[name][0]
    return tensor[positions] if tensor.dim() == 2 else tensor[:, positions]


Split = Callable[[str, torch.Tensor], tuple[list[str], torch.Tensor]]


def _attention_parts(
    stream: Stream, trace: Trace, attn: nn.Module, tap: str, label: str, after: nn.Module | None, split: Split | None
) -> None:
    """Add one attention sublayer's heads and its output bias, through a sandwich norm ``after``
    (Gemma 3: norm(Σ heads + bias), its scale held at the whole output's). ``split`` may replace a
    head's part by parts of its own (what_it_carries: one per key), before that norm."""
    heads = head_outputs(attn, _at(trace, f"{tap}.z", stream.positions))  # (H, P, d)
    names, parts = [f"{label}.H{h}" for h in range(heads.shape[0])], heads
    if split is not None:
        pieces = [split(name, heads[h]) for h, name in enumerate(names)]
        names, parts = [n for more, _ in pieces for n in more], torch.cat([more for _, more in pieces])  # (C, P, d)
    bias = attn.o_proj.bias
    if after is None:
        stream.add(names, parts)
        stream.add_bias(bias)
        return
    n = parts.shape[0]
    if bias is not None:
        parts = torch.cat([parts, bias.expand(1, *parts.shape[1:])])
    normed, after_bias = fixed_norm(after, parts)
    stream.add(names, normed[:n])
    stream.add_bias(normed[n:].sum(0) if bias is not None else None)
    stream.add_bias(after_bias)


def _ffn_part(stream: Stream, trace: Trace, layer: nn.Module, tap: str, label: str) -> None:
    out = _at(trace, f"{tap}.ffn.out", stream.positions)[None]  # (1, P, d)
    after = getattr(layer, "ffn_norm_after", None)
    if after is not None:
        out, bias = fixed_norm(after, out)
        out = out if bias is None else out + bias
    stream.add([f"{label}.mlp"], out)


def walk(
    model: nn.Module,
    trace: Trace,
    positions: list[int],
    until: tuple[int, str] | None = None,
    stack: str = "decoder",
    split: Split | None = None,
) -> Stream:
    """The stream's components at ``positions`` as layer ``until[0]``'s sublayer ``until[1]``
    ("self" or "cross") reads it (before its own norm), or after the last layer and the final
    norm when ``until`` is None."""
    module = getattr(model, stack)
    prefix = "enc." if stack == "encoder" else ""
    stream = Stream([prefix + "embed"], _at(trace, f"{stack}.embed", positions)[None], list(positions), prefix)
    for index, layer in enumerate(module.layers):
        tap = f"{stack}.{index}"
        if until == (index, "self"):
            return stream
        self_after = getattr(layer, "self_attn_norm_after", None)
        _attention_parts(stream, trace, layer.self_attn, f"{tap}.self_attn", f"L{index}", self_after, split)
        if getattr(layer, "parallel_residual", False):
            _ffn_part(stream, trace, layer, tap, f"L{index}")
            continue
        if not layer.norm_first:
            stream.through(layer.self_attn_norm)
        if getattr(layer, "cross_attn", None) is not None:
            if until == (index, "cross"):
                return stream
            _attention_parts(stream, trace, layer.cross_attn, f"{tap}.cross_attn", f"L{index}.cross", None, split)
            if not layer.norm_first:
                stream.through(layer.cross_attn_norm)
        _ffn_part(stream, trace, layer, tap, f"L{index}")
        if not layer.norm_first:
            stream.through(layer.ffn_norm)
    if until is not None:
        raise ValueError(f"layer {until[0]} has no {until[1]}-attention")
    stream.through(module.final_norm)
    return stream
