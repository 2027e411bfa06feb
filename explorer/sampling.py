"""Choosing the next token from the logits: greedy, or sampling with temperature, top-k, top-p.

Sampling draws from a generator seeded by (seed, position), so the same position always
draws the same random number: undo and step again, or rerun with the cache switched,
and the same token comes out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from explorer.errors import InputError

# What the page's controls offer; saved sessions, links and kept sessions are held to the same.
TEMPERATURE_RANGE = (0.0, 2.0)
TOP_K_RANGE = (0, 200)
TOP_P_RANGE = (0.05, 1.0)
SEED_RANGE = (0, 2**32 - 1)  # the draw's seed is seed * 1,000,003 + position: it must fit torch's 64 bits


@dataclass(frozen=True)
class SamplingSettings:
    temperature: float = 0.0  # 0 means greedy: always the most probable token
    top_k: int = 0  # keep the k most probable tokens (0: all)
    top_p: float = 1.0  # keep the smallest set whose probability reaches p
    seed: int = 0

    def __post_init__(self) -> None:
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise InputError("the temperature must be 0 (greedy) or a positive number")
        if self.top_k < 0:
            raise InputError("top-k must be 0 (off) or a positive count")
        if not 0 < self.top_p <= 1:  # (NaN fails this too)
            raise InputError("top-p must be more than 0 and at most 1")
        if not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]:
            raise InputError(f"the seed must be a whole number from {SEED_RANGE[0]} to {SEED_RANGE[1]}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def sampling_distribution(logits: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """(vocab,) logits -> (vocab,) probabilities that the sampler draws from."""
    logits = logits.float() / settings.temperature
    if settings.top_k:
        kth = logits.topk(min(settings.top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = logits.softmax(-1)
    if settings.top_p < 1:
        sorted_probs, order = probs.sort(descending=True)
        before = sorted_probs.cumsum(-1) - sorted_probs  # mass of the tokens ranked above
        drop = before >= settings.top_p  # the most probable token is always kept
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(0, order, sorted_probs)
        probs = probs / probs.sum()
    return probs


def choose_token(logits: torch.Tensor, settings: SamplingSettings, position: int) -> int:
    """The next token for ``position`` from (vocab,) logits."""
    if settings.greedy:
        return int(logits.argmax())
    generator = torch.Generator().manual_seed(settings.seed * 1_000_003 + position)
    return int(torch.multinomial(sampling_distribution(logits, settings), 1, generator=generator))
