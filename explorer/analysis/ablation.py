"""Switch heads (or a layer's attention or feed-forward) off and see what the model needed.

The tokens on screen are run again, in one pass, with the choice switched off; for every
position the probability the model gave the token that is there is compared with the
session's own, and so is the greedy choice: the first generated token the changed model would
not have chosen is where its continuation departs. The session itself is not touched (a branch
that steps on under the change is ``GenerationSession.with_interventions``).

A choice is written the way the page shows it: ``17.3`` (layer 17, head 3), ``5.attention`` or
``5.mlp`` (layer 5's whole attention or feed-forward), separated by spaces or commas.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from explorer.errors import InputError
from explorer.model.interventions import ABLATIONS, SUBLAYERS, ablate_heads, ablate_sublayer
from explorer.model.taps import Intervention
from explorer.session import GenerationSession

ITEM = re.compile(r"^(\d+)\.(\d+|attention|mlp)$")


@dataclass(frozen=True)
class SwitchedOff:
    """What to switch off: heads as (layer, head), sublayers as (layer, "attention" | "mlp")."""

    heads: frozenset[tuple[int, int]] = frozenset()
    sublayers: frozenset[tuple[int, str]] = frozenset()
    method: str = "zero"

    def __bool__(self) -> bool:
        return bool(self.heads or self.sublayers)

    def text(self) -> str:
        """The choice as the page writes it (and ``parse`` reads it back)."""
        items = [(layer, str(head)) for layer, head in self.heads] + list(self.sublayers)
        return ", ".join(f"{layer}.{what}" for layer, what in sorted(items, key=lambda i: (i[0], i[1])))

    def describe(self) -> str:
        parts = [f"layer {layer} head {head}" for layer, head in sorted(self.heads)]
        names = {"attention": "attention", "mlp": "feed-forward"}
        parts += [f"layer {layer}'s {names[what]}" for layer, what in sorted(self.sublayers)]
        return ", ".join(parts) if parts else "nothing"

    def with_head(self, layer: int, head: int) -> SwitchedOff:
        return SwitchedOff(self.heads | {(layer, head)}, self.sublayers, self.method)

    def with_sublayer(self, layer: int, sublayer: str) -> SwitchedOff:
        return SwitchedOff(self.heads, self.sublayers | {(layer, sublayer)}, self.method)

    def heads_of(self, layer: int) -> list[int]:
        return sorted(head for at, head in self.heads if at == layer)

    def interventions(self) -> list[Intervention]:
        by_layer: dict[int, list[int]] = {}
        for layer, head in self.heads:
            by_layer.setdefault(layer, []).append(head)
        changes = ablate_heads(by_layer, self.method)
        return changes + [ablate_sublayer(layer, what) for layer, what in sorted(self.sublayers)]


def parse(text: str, session: GenerationSession, method: str = "zero") -> SwitchedOff:
    """The choice written in ``text``, checked against the session's model."""
    if method not in ABLATIONS:
        raise InputError(f"switch off by {method!r}? Choose one of {', '.join(ABLATIONS)}")
    c = session.config
    heads, sublayers = set(), set()
    for item in re.split(r"[\s,;]+", (text or "").strip()):
        if not item:
            continue
        match = ITEM.match(item.lower())
        if match is None:
            raise InputError(
                f"“{item}” is not a head or a sublayer: write layer.head (17.3), layer.attention or layer.mlp"
            )
        layer, what = int(match[1]), match[2]
        session.attention.check_layer(layer)
        if what in SUBLAYERS:
            sublayers.add((layer, what))
        elif int(what) >= c.n_heads:
            raise InputError(f"head {what} does not exist; layer {layer} has heads 0 to {c.n_heads - 1}")
        else:
            heads.add((layer, int(what)))
    return SwitchedOff(frozenset(heads), frozenset(sublayers), method)


@dataclass
class AblationResult:
    switched_off: SwitchedOff
    token_ids: list[int]  # the tokens it covers
    prompt_length: int
    before: np.ndarray  # (T - 1,) the probability of the token at each position 1..T-1, as the session ran
    after: np.ndarray  # (T - 1,) the same with the choice switched off
    chosen_after: list[int]  # (T - 1,) the greedy choice at each position with the choice switched off

    @property
    def departures(self) -> list[int]:
        """The generated positions whose token the changed model would not choose (greedy)."""
        generated = range(max(1, self.prompt_length), len(self.token_ids))
        return [p for p in generated if self.chosen_after[p - 1] != self.token_ids[p]]

    @property
    def departs_at(self) -> int | None:
        """The first of them: where the changed model's greedy continuation departs."""
        return next(iter(self.departures), None)


@torch.inference_mode()
def ablate(session: GenerationSession, switched_off: SwitchedOff) -> AblationResult:
    """Run the tokens on screen with ``switched_off`` and compare with the session's own pass."""
    if not switched_off:
        raise InputError("Nothing is switched off: add a head or a sublayer first.")
    if len(session.token_ids) < 2:
        raise InputError("Step once first: there is no token yet whose probability could change.")
    ids = session.ids_tensor(session.token_ids)  # (1, T)
    clean = session.run_decoder(ids).logits[0].float()  # (T, vocab): the session's own pass
    changes = (*session.interventions, *switched_off.interventions())
    changed = session.run_decoder(ids, interventions=changes).logits[0].float()
    following = torch.tensor(session.token_ids[1:])  # (T - 1,) the token after each position

    def chance(logits: torch.Tensor) -> np.ndarray:
        return logits[:-1].softmax(-1).gather(1, following[:, None])[:, 0].cpu().numpy()

    return AblationResult(
        switched_off, list(session.token_ids), session.prompt_length, chance(clean), chance(changed),
        changed[:-1].argmax(-1).tolist(),
    )  # fmt: skip
