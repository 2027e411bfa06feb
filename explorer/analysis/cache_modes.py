"""The cache on against the cache off: the same generation rerun both ways, measured in one go."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.admission import between_chunks
from explorer.errors import InputError
from explorer.session import GenerationSession


@dataclass
class CacheComparison:
    """The same generation run twice, cache on and cache off, measured in one go."""

    positions: list[int]
    ms_cached: list[float]
    ms_uncached: list[float]
    tokens_cached: list[int]
    tokens_uncached: list[int]
    max_logit_difference: float
    cache_bytes: int
    token_ids: list[int]  # the session's sequence that was rerun

    @property
    def tokens_identical(self) -> bool:
        return self.tokens_cached == self.tokens_uncached


def compare_cache_modes(session: GenerationSession) -> CacheComparison:
    """Rerun ``session``'s generation with the cache on and with it off, and compare.

    Both runs start from the same input with the same settings and choose their own tokens
    (forcing only where the user forced one), so identical tokens are a check, not an assumption.
    """
    if session.needs_whole_passes:
        raise InputError("This branch's mean ablation needs every position in each pass: it has no cached run.")
    (on, logits_on), (off, logits_off) = (_rerun(session, use_cache) for use_cache in (True, False))
    diff = max(float((a - b).abs().max()) for a, b in zip(logits_on, logits_off, strict=False))
    return CacheComparison(
        positions=[t.position for t in on.timings],
        ms_cached=[t.elapsed_ms for t in on.timings],
        ms_uncached=[t.elapsed_ms for t in off.timings],
        tokens_cached=on.generated_ids,
        tokens_uncached=off.generated_ids,
        max_logit_difference=diff,
        cache_bytes=on.cache_bytes,
        token_ids=list(session.token_ids),
    )


def _rerun(session: GenerationSession, use_cache: bool) -> tuple[GenerationSession, list[torch.Tensor]]:
    """The session's generation again from its input, cache on or off, as many steps as it took;
    with the (vocab,) logits before each step and after the last."""
    forced = {s.position: s.token_id for s in session.steps if s.forced}
    replay = session.started_again(use_cache=use_cache)
    logits = [replay.next_logits()]
    for _ in range(len(session.steps)):
        if replay.finished:
            break
        between_chunks()  # cache off, a step is a pass over the whole text: Steps first; stop if its client left
        position = len(replay.token_ids)
        if position in forced:
            replay.force(forced[position])
        else:
            replay.step()
        logits.append(replay.next_logits())
    return replay, logits
