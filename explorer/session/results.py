"""What a session hands out: a step's result, its timing, the candidates a token was chosen from."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import torch

from explorer.errors import InputError
from explorer.model import Trace

T = TypeVar("T")


def timed(run: Callable[[], T], device: torch.device) -> tuple[T, float]:
    """``run()``'s result and how long it took, in milliseconds."""
    start = time.perf_counter()
    result = run()
    if device.type == "cuda":
        torch.cuda.synchronize()  # GPU kernels run asynchronously: wait before reading the clock
    return result, (time.perf_counter() - start) * 1000


class SessionFinished(InputError):
    """A step past the model's end token."""


@dataclass(frozen=True)
class TopToken:
    token_id: int
    text: str
    probability: float  # the model's own probability (softmax of the logits, temperature 1)


@dataclass
class StepResult:
    token_id: int
    token_text: str
    position: int  # where the token stands in ``token_ids``
    elapsed_ms: float  # the model pass that processed this token
    cache_bytes: int
    use_cache: bool
    top_k: list[TopToken]  # the distribution this token was chosen from, most probable first
    trace: Trace = field(repr=False)  # what this step's pass recorded (the session's own list drops it)
    forced: bool = False
    finished: bool = False


@dataclass
class StepTiming:
    position: int
    elapsed_ms: float
    use_cache: bool
