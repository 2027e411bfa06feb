"""The KV-cache lab: a session's own text rerun under a cache policy beside the full cache.

``run_policy`` replays the session's tokens through two fresh sessions, one under the full cache
and one under the policy, and measures at every step what the policy changes: the bytes held, the
KL divergence of the next-token distribution from the full cache's, and whether the top token is
the same. Both replays read the same tokens (the session's), so the first step whose top token
differs is where greedy generation under the policy would first depart from the full cache's: up
to that step both have read the same text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from explorer.admission import PREFILL_CHUNK, between_chunks
from explorer.cache_policies import full_cache_bytes
from explorer.errors import InputError
from explorer.model.cache_policy import CachePolicy
from explorer.session import GenerationSession

HELD, EVICTED, SINK, QUANTIZED = 1.0, 0.0, 2.0, 3.0  # the grid's cell kinds (a fraction of heads when mixed)


@dataclass
class PolicyRun:
    """A session's text under ``policy`` beside the full cache, step by step."""

    policy: CachePolicy
    positions: list[int]  # the position each step predicted from (its last token)
    kl: list[float]  # KL(full || policy) of the next-token distribution, in nats
    same_top: list[bool]  # the policy's top token is the full cache's
    bytes_held: list[int]  # what the policy's cache held after each step
    bytes_full: list[int]  # what the full cache held
    grid: (
        np.ndarray
    )  # (layers, positions) what each layer holds at the end (HELD, EVICTED, SINK, QUANTIZED, or between)

    @property
    def first_departure(self) -> int | None:
        """The first position whose next token the policy would choose differently, or None."""
        return next((p for p, same in zip(self.positions, self.same_top, strict=True) if not same), None)

    @property
    def saving(self) -> float:
        """The share of the full cache's bytes the policy does not hold, at the end."""
        return 1 - self.bytes_held[-1] / self.bytes_full[-1]


def kl_divergence(full_logits: torch.Tensor, policy_logits: torch.Tensor) -> float:
    """KL(p_full || p_policy) in nats, from (vocab,) logits."""
    full, policy = full_logits.float().log_softmax(-1), policy_logits.float().log_softmax(-1)
    return max(0.0, float((full.exp() * (full - policy)).sum()))


def run_policy(session: GenerationSession, policy: CachePolicy) -> PolicyRun:
    """Replay ``session``'s generated tokens under the full cache and under ``policy``; the
    session itself is untouched."""
    if len(session.generated_ids) == 0:
        raise InputError("Step or Generate first: the lab compares the policy with the full cache at each step.")
    if session.interventions:
        raise InputError(
            "This session switches heads or sublayers off: the lab compares caches on the model as it is. "
            "Go back to the session without them (Switch heads off) to run a policy."
        )
    full = session.started_again(record_attention=False, interventions=(), cache_policy=None)
    other = session.started_again(record_attention=False, interventions=(), cache_policy=policy)
    run = PolicyRun(policy, [], [], [], [], [], np.zeros(0))
    for i, token in enumerate([None, *session.generated_ids]):
        if i % PREFILL_CHUNK == PREFILL_CHUNK - 1:  # Steps first; stop if the client has gone
            between_chunks()
        if token is not None:
            full.append_recorded(token, forced=True)
            other.append_recorded(token, forced=True)
        a, b = full.next_logits(), other.next_logits()
        run.positions.append(len(full.token_ids) - 1)
        run.kl.append(kl_divergence(a, b))
        run.same_top.append(int(a.argmax()) == int(b.argmax()))
        run.bytes_held.append(other.cache.self_attn_bytes)
        run.bytes_full.append(full_bytes(full))
    run.grid = held_grid(other)
    return run


def full_bytes(session: GenerationSession) -> int:
    """What the full cache holds, a sliding layer counting only the positions its window still
    reads (min(window, length)): what a sliding cache keeps, and what a policy's bytes are measured
    against."""
    return full_cache_bytes(session.config, session.cache.length, session.cache.store.dtype.itemsize)


def held_grid(session: GenerationSession) -> np.ndarray:
    """(layers, positions): what each layer of the session's cache holds of each position, as the
    fraction of its key/value heads that hold it (1 held, 0 evicted), SINK for a policy's sinks,
    QUANTIZED for positions held as integers."""
    c, n = session.config, len(session.token_ids)
    grid = np.zeros((c.n_layers, n))
    policy = session.cache_policy
    if not session.cache_plan.under_policy:
        return grid + HELD
    for layer in range(c.n_layers):
        held = session.cache.held_positions(layer)  # (kv_heads, held); -1: a slot a sliding window passed
        if policy.bits is not None and not policy.evicts:  # every position from the first held, in order
            first = int(held[0, 0]) if held.numel() else 0
            grid[layer, first:] = HELD
            grid[layer, first : first + session.cache.quantized_positions(layer)] = QUANTIZED
            continue
        counts = np.bincount(held[held >= 0].numpy(), minlength=n)[:n]
        grid[layer] = counts / held.shape[0]
    if getattr(policy, "sinks", None) and policy.name == "sinks":  # where still held (a sliding window passes them)
        grid[:, : policy.sinks] = np.where(grid[:, : policy.sinks] > 0, SINK, grid[:, : policy.sinks])
    return grid
