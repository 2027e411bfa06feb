"""The causal proof, live: one parallel pass against the step-by-step run, and a sandbox
that removes the mask to show what it prevents.

Training runs every position of a text in one pass; generation runs one token at a time.
They agree only because of the causal mask: position i never reads positions after i, so
its output cannot depend on them. ``parallel_check`` measures that agreement on the
session's own tokens; ``unmasked_pass`` shows the alternative.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from explorer.model import ATTENTION
from explorer.session import GenerationSession


@dataclass
class ParallelCheck:
    positions: int
    max_logit_difference: float  # one parallel pass vs one token at a time, over every position
    max_attention_difference: float  # the parallel pass's attention vs the attention on screen
    same_predictions: bool  # the most probable next token agrees at every position
    largest_logit: float  # for scale: the largest |logit| of the parallel pass


@torch.inference_mode()
def step_by_step_logits(session: GenerationSession, progress=None) -> torch.Tensor:
    """(T, vocab) logits of every position, fed one token at a time through a fresh KV cache,
    as Step does (the prompt included, which Step's prefill runs in one pass).
    ``progress(fraction)`` is called after each token, if given."""
    cache = session.model.new_cache()
    rows = []
    n = len(session.token_ids)
    for i in range(n):
        ids = session.ids_tensor(session.token_ids[i : i + 1])  # (1, 1)
        out = session.run_decoder(ids, cache)
        rows.append(out.logits[0, -1].float().cpu())
        if progress is not None:
            progress((i + 1) / n)
    return torch.stack(rows)


def parallel_check(session: GenerationSession, progress=None) -> ParallelCheck:
    full = session.full_pass(ATTENTION)
    parallel = full.logits[0].float().cpu()  # (T, vocab)
    stepwise = step_by_step_logits(session, progress)
    attention_diff = 0.0
    n = len(session.token_ids)
    for i in range(session.config.n_layers):
        shown = session.self_attention(i)  # (heads, T, T), from the queries and keys the steps kept
        attention_diff = max(attention_diff, float(np.abs(full.trace.self_attention(i)[0].cpu().numpy() - shown).max()))
        if session.is_encoder_decoder:
            shown = session.cross_attention(i)
            parallel_cross = full.trace.cross_attention(i)[0].cpu().numpy()
            attention_diff = max(attention_diff, float(np.abs(parallel_cross - shown).max()))
    return ParallelCheck(
        positions=n,
        max_logit_difference=float((parallel - stepwise).abs().max()),
        max_attention_difference=attention_diff,
        same_predictions=bool((parallel.argmax(-1) == stepwise.argmax(-1)).all()),
        largest_logit=float(parallel.abs().max()),
    )


@dataclass
class Sandbox:
    """One pass over the session's tokens with the causal mask removed.

    Only one layer's attention is kept (every layer's would be 30 x 9 x T x T values for
    SmolLM2, 280 MB at 512 tokens); ``unmasked_pass`` again gives another layer's."""

    layer: int
    attention: np.ndarray  # (heads, T, T) of ``layer``: now with weight above the diagonal
    future_weight: float  # mean over layers, heads and rows (all but the last) of the weight on later positions
    # (position, masked top token, unmasked top token) where they differ. The last position can
    # change too: its first layer reads what it read before, but later layers read the earlier
    # positions' states, which now include the future.
    changed: list[tuple[int, int, int]]
    max_logit_difference: float  # unmasked vs masked logits, over every position


@torch.inference_mode()
def unmasked_pass(session: GenerationSession, layer: int = 0) -> Sandbox:
    """What the model computes when every position may read the future; ``layer``'s attention
    is kept. The session is untouched: this is a separate pass without the cache."""
    session.attention.check_layer(layer)
    masked = session.full_pass().logits[0].float().cpu()  # (T, vocab)
    free = session.full_pass(ATTENTION, causal=False)
    unmasked = free.logits[0].float().cpu()
    n = len(session.token_ids)
    future = torch.ones(n, n, dtype=torch.bool).triu(1)  # (T, T) key after query
    per_row = []  # per layer: the mean weight a row (all but the last, which has no future) puts on later keys
    for i in range(session.config.n_layers):
        probs = free.trace.self_attention(i)[0].float()  # (heads, T, T)
        per_row.append(float((probs * future).sum(-1)[:, : n - 1].mean()) if n > 1 else 0.0)
    top_masked, top_free = masked.argmax(-1).tolist(), unmasked.argmax(-1).tolist()
    changed = [(i, a, b) for i, (a, b) in enumerate(zip(top_masked, top_free, strict=True)) if a != b]
    return Sandbox(
        layer=layer,
        attention=free.trace.self_attention(layer)[0].float().cpu().numpy(),
        future_weight=float(np.mean(per_row)),
        changed=changed,
        max_logit_difference=float((unmasked - masked).abs().max()),
    )
