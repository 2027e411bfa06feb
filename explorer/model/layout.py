"""How the weights sit in memory: a layout that makes one generation step read them faster.

A cached step multiplies one row vector by every weight matrix: a matrix-vector product
(GEMV), whose speed is the speed at which the CPU streams the matrix from memory (the whole
model is ~540 MB for SmolLM2, far more than any cache). ``nn.Linear`` stores its weight
``(out, in)`` and computes ``x @ weight.T``. For a matrix with more outputs than inputs (the
output head, 49,152 x 576; a feed-forward's gate and up, 1,536 x 576) that product streams the
matrix about twice as slowly as the same product on the matrix stored ``(in, out)``; for the
others the stored layout is as fast or faster. ``bench/bench_model.py`` measures both layouts
for every shape in the run it reports, so the rule can be checked on any CPU.

``store_for_steps`` keeps every parameter's name, shape and values and changes only its
strides: a wide weight becomes the transpose of an ``(in, out)`` contiguous buffer. So
``lm_head.weight`` is still the checkpoint's ``(out, in)`` matrix (what a learner reads, and
what ``state_dict`` returns), and ``F.linear`` finds ``weight.T`` contiguous and runs the
fast product. The token table tied to the output head moves with it: a lookup reads one
strided column per token, while the head streams all 113 MB of it on every step.
"""

from __future__ import annotations

import torch
from torch import nn


def column_major(weight: torch.Tensor) -> torch.Tensor:
    """The same (out, in) matrix, stored as the transpose of a contiguous (in, out) buffer."""
    return weight.detach().t().contiguous().t()


def prefers_column_major(weight: torch.Tensor) -> bool:
    """A (out, in) weight with more outputs than inputs streams faster stored (in, out)."""
    return weight.dim() == 2 and weight.shape[0] > weight.shape[1]


def store_for_steps(model: nn.Module) -> nn.Module:
    """Give every wide linear weight (and a token table tied to one) the column-major layout, in place.

    A parameter shared by several modules (tied embeddings) is replaced once, everywhere.
    """
    replaced: dict[int, nn.Parameter] = {}
    for module in model.modules():
        if isinstance(module, nn.Linear) and prefers_column_major(module.weight):
            weight = module.weight
            if id(weight) not in replaced:
                replaced[id(weight)] = nn.Parameter(column_major(weight), requires_grad=weight.requires_grad)
    for module in model.modules():
        if isinstance(module, nn.Linear | nn.Embedding) and id(module.weight) in replaced:
            module.weight = replaced[id(module.weight)]
    return model
