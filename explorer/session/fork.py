"""A copy of a session that shares what the two hold alike: the tokens' keys, values, queries.

A class following its teacher holds the teacher's tokens in thirty sessions. Instead of thirty
replays (thirty passes per step, thirty copies of the cache), each student's session can be a
*fork* of the teacher's: its own lists of tokens, steps and timings, but the same blocks of the
model's stores (``explorer/model/paged.py``) for the cache and the kept queries and keys. A block
is copied only when one of the sessions writes into it: the first token a student steps on their
own, or the teacher's next step (one block each, 16 positions).

Undo in a fork truncates its own lengths only: the blocks it shared keep the other session's
positions, and the fork's next step writes into its own copy. A session under a cache policy is
not forked (its cache's entries are rewritten in place as keys are evicted): it replays.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from explorer.session.attention_store import AttentionInputs, GrowingKept, PagedKept, SessionAttention

if TYPE_CHECKING:
    from explorer.session.generation import GenerationSession


def can_fork(session: GenerationSession) -> bool:
    """Whether ``fork_session`` may copy this session (not under a cache policy)."""
    return not session.under_policy and session.eviction_log is None


def fork_session(session: GenerationSession) -> GenerationSession:
    """An independent session with ``session``'s text, settings, tokens and history, sharing
    its blocks copy-on-write; no pass is run."""
    if not can_fork(session):
        raise ValueError("a session under a cache policy is not forked: replay its tokens instead")
    other = copy.copy(session)  # settings, the model, the logits (never written in place)
    other.token_ids = list(session.token_ids)
    other._token_texts = list(session._token_texts)
    other.steps, other.timings = list(session.steps), list(session.timings)
    other.cache = session.cache.fork() if session.cache is not None else None
    other.attention = fork_attention(session.attention)
    return other


def fork_attention(attention: SessionAttention) -> SessionAttention:
    """The same kept queries and keys (self-attention's shared, cross-attention's copied: small);
    the probabilities computed for a view are recomputed on demand."""
    other = copy.copy(attention)
    other.self_inputs = _fork_inputs(attention.self_inputs, _fork_paged(attention.self_inputs.kept))
    other.cross_inputs = _fork_inputs(attention.cross_inputs, copy.deepcopy(attention.cross_inputs.kept))
    return other


def _fork_paged(kept: PagedKept) -> PagedKept:
    other = copy.copy(kept)
    other.sequence, other.lengths = kept.sequence.fork(), list(kept.lengths)
    return other


def _fork_inputs(inputs: AttentionInputs, kept: PagedKept | GrowingKept) -> AttentionInputs:
    other = copy.copy(inputs)
    other.kept, other._computed = kept, None
    return other
