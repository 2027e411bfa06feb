"""Taps: one named place for every internal tensor, where a pass can read it or change it.

A ``Tap`` is an identity module placed where a tensor the explorer shows is made (the
residual stream after each sublayer, queries, keys, attention probabilities, each head's
output, the feed-forward's hidden activation, ...). Its name comes from the module tree
once, when the model is built (``decoder.layers.3.self_attn.probs`` is named
``decoder.3.self_attn.probs``; a module's own output tap, an attribute called ``tap``,
takes the module's name: ``decoder.embed``). ``explorer/model/trace.py`` lists them all.

What a pass does at its taps is the pass's business, not the modules': the model is shared
by every user at once, so a pass sets its ``Run`` (what to keep, what to change) in a
context variable for its own thread while it runs. With nothing to keep and nothing to
change there is no run at all: every tap returns its input, and attention takes PyTorch's
fused kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
from torch import nn

from .trace import Trace


class Tap(nn.Module):
    """Where a named tensor passes: returned unchanged unless a run keeps or changes it."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind  # the Record kind that keeps it (trace.py)
        self.name = ""  # set by name_taps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        run = _RUN.get()
        return x if run is None else run.visit(self, x)

    def extra_repr(self) -> str:
        return f"{self.name!r}, kind={self.kind!r}"


def tap_name(path: str) -> str:
    """The tap's name from its place in the module tree."""
    name = path.replace(".layers.", ".")
    return name.removesuffix(".tap")


def name_taps(model: nn.Module) -> dict[str, Tap]:
    """Name every tap of ``model`` from the module tree; returns them by name."""
    taps = {}
    for path, module in model.named_modules():
        if isinstance(module, Tap):
            module.name = tap_name(path)
            taps[module.name] = module
    return taps


@dataclass(frozen=True)
class Intervention:
    """A change made to one tap's tensor during a pass: ``change(tensor, run) -> tensor``.

    ``whole_sequence`` marks a change that needs every position in the same pass (a mean over
    positions): a session that uses it runs each step over the whole sequence, without the cache.
    """

    tap: str
    change: Callable[[torch.Tensor, Run], torch.Tensor]
    description: str
    whole_sequence: bool = False


@dataclass
class Run:
    """One pass's business at its taps: what to keep (``trace``), what to change."""

    trace: Trace
    changes: dict[str, list[Intervention]] = field(default_factory=dict)
    start: int = 0  # the absolute position of the pass's first new position

    def touches(self, tap: Tap) -> bool:
        """Whether this run needs the tap's tensor at all (attention materialises the
        probabilities only for a run that keeps or changes them)."""
        return tap.name in self.changes or self.trace.wants(tap.kind, tap.name)

    def visit(self, tap: Tap, x: torch.Tensor) -> torch.Tensor:
        for intervention in self.changes.get(tap.name, ()):
            x = intervention.change(x, self)
        self.trace.keep(tap.kind, tap.name, x)  # what the model used, after any change
        return x


def flat_interventions(items) -> tuple[Intervention, ...]:
    """What the experiment helpers return, in any mix: an Intervention (``ablate_sublayer``,
    ``patch``), a list of them (``ablate_heads``), or lists of those, flattened in order.
    Anything else is a TypeError that says what was expected."""
    if isinstance(items, Intervention):
        return (items,)
    if isinstance(items, (str, bytes, dict)) or not isinstance(items, Iterable):
        raise TypeError(
            f"interventions must be Interventions (what ablate_heads, ablate_sublayer and patch return) "
            f"or lists of them, not {type(items).__name__}"
        )
    return tuple(intervention for item in items for intervention in flat_interventions(item))


_RUN: ContextVar[Run | None] = ContextVar("decoder_explorer_tap_run", default=None)


def current_run() -> Run | None:
    return _RUN.get()


@contextmanager
def tapping(trace: Trace, interventions: Sequence[Intervention] = (), start: int = 0) -> Iterator[None]:
    """Make the pass run inside this block keep what ``trace`` asks and apply ``interventions``."""
    if not trace.record.kinds and not trace.record.names and not interventions:
        yield  # the fast path: no run, every tap is the identity
        return
    changes: dict[str, list[Intervention]] = {}
    for intervention in flat_interventions(interventions):
        changes.setdefault(intervention.tap, []).append(intervention)
    token = _RUN.set(Run(trace, changes, start))
    try:
        yield
    finally:
        _RUN.reset(token)
