"""Head roles: scores computed from attention, and a tag where the evidence is clear.

Each score is the mean attention weight a head puts where a role would put it, so 1 means
"always exactly there" and a head that spreads its weight evenly over n keys scores ~1/n:

* previous token: query i reads key i - 1;
* first token (an "attention sink"): query i reads key 0;
* self (diagonal): query i reads key i;
* induction: on a random token sequence repeated twice, a query in the second copy reads
  the token that followed its earlier occurrence (the copying mechanism of in-context
  learning; Olsson et al., 2022);
* alignment (cross-attention): the source position a target token reads most moves forward
  with the target, and holds most of the weight, as a word alignment does.

The self-attention scores use queries from position 2 on: query 0 can only read itself, and
for query 1 the previous token is the first token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from explorer.model import ATTENTION
from explorer.session import GenerationSession, InputError

THRESHOLDS = {"previous token": 0.5, "first token": 0.5, "self": 0.5, "induction": 0.4, "alignment": 0.5}
INDUCTION_PERIOD = 24  # random tokens, repeated once
MIN_ROWS = 3  # fewer query rows are no evidence of anything


def row_entropy(attention: np.ndarray) -> np.ndarray:
    """(heads, Q, K) -> (heads,) mean entropy of a query's weights, in nats."""
    p = np.clip(attention, 1e-12, 1.0)
    return -(attention * np.log(p)).sum(-1).mean(-1)


def offset_score(attention: np.ndarray, key_of_query) -> np.ndarray:
    """(heads, T, T) -> (heads,) mean weight on key ``key_of_query(i)`` over queries i >= 2."""
    n = attention.shape[1]
    queries = np.arange(2, n)
    keys = np.array([key_of_query(i) for i in queries])
    return attention[:, queries, keys].mean(-1)


def previous_token_score(attention: np.ndarray) -> np.ndarray:
    return offset_score(attention, lambda i: i - 1)


def first_token_score(attention: np.ndarray) -> np.ndarray:
    return offset_score(attention, lambda i: 0)


def self_score(attention: np.ndarray) -> np.ndarray:
    return offset_score(attention, lambda i: i)


def induction_score(attention: np.ndarray, start: int, period: int) -> np.ndarray:
    """(heads, T, T) over ``start`` tokens then a random block of ``period`` tokens twice ->
    (heads,) mean weight of a second-copy query on the key after its first occurrence."""
    queries = np.arange(start + period, start + 2 * period - 1)  # second copy, all but its last
    keys = queries - period + 1
    return attention[:, queries, keys].mean(-1)


def alignment_score(cross: np.ndarray) -> np.ndarray:
    """(heads, T, S) cross-attention -> (heads,) monotonicity x focus.

    Monotonicity: the share of consecutive target rows whose most-read source position does
    not move backwards; focus: the mean weight of that most-read position.
    """
    if cross.shape[1] < 2:
        return np.zeros(cross.shape[0])
    peaks = cross.argmax(-1)  # (heads, T)
    forward = (np.diff(peaks, axis=-1) >= 0).mean(-1)
    focus = cross.max(-1).mean(-1)
    return forward * focus


@dataclass
class HeadRoles:
    """Scores per (layer, head) and the tag each head gets ("" where nothing is clear)."""

    scores: dict[str, np.ndarray]  # role -> (layers, heads)
    entropy: np.ndarray  # (layers, heads) nats, on the session's text
    tags: list[list[str]]  # [layer][head]
    rows: int  # query rows the text scores came from

    def tag(self, layer: int, head: int) -> str:
        return self.tags[layer][head]

    def summary(self, layer: int, head: int) -> str:
        parts = [f"{role} {values[layer, head]:.2f}" for role, values in self.scores.items()]
        return f"layer {layer}, head {head}: " + ", ".join(parts) + f"; entropy {self.entropy[layer, head]:.2f} nats"


def assign_tags(scores: dict[str, np.ndarray]) -> list[list[str]]:
    """The role with the highest score above its threshold, per head."""
    layers, heads = next(iter(scores.values())).shape
    tags = []
    for i in range(layers):
        row = []
        for h in range(heads):
            above = [(values[i, h], role) for role, values in scores.items() if values[i, h] >= THRESHOLDS[role]]
            row.append(max(above)[1] if above else "")
        tags.append(row)
    return tags


@torch.inference_mode()
def induction_attention(session: GenerationSession, period: int = INDUCTION_PERIOD, seed: int = 0):
    """Self-attention of every layer on [first token] + R + R, R random ordinary tokens.

    Returns (list of (heads, T, T) arrays, start) where start is the length of the prefix.
    """
    config = session.config
    special = {t for t in (config.bos_token_id, config.eos_token_id, config.pad_token_id) if t is not None}
    generator = np.random.default_rng(seed)
    pool = np.array([t for t in range(min(config.vocab_size, 20_000)) if t not in special])
    block = generator.choice(pool, size=period, replace=False).tolist()
    prefix = session.token_ids[:1]  # the model's usual first token (a start token for translators)
    ids = session.ids_tensor(prefix + block + block)  # (1, 1 + 2 * period)
    out = session.run_decoder(ids, record=ATTENTION)
    return [out.trace.self_attention(i)[0].float().cpu().numpy() for i in range(config.n_layers)], len(prefix)


def head_roles(session: GenerationSession) -> HeadRoles:
    """Score every head: previous/first/self and entropy on the session's own text, induction
    on a repeated random sequence, alignment on the cross-attention of a translator."""
    n = len(session.token_ids)
    if n < MIN_ROWS + 2:
        raise InputError(f"Head roles need at least {MIN_ROWS + 2} tokens; step a few times first.")
    per_layer = {"previous token": [], "first token": [], "self": [], "entropy": []}
    for i in range(session.config.n_layers):  # one layer's (heads, T, T) at a time: bounded memory
        attention = session.self_attention(i)
        per_layer["previous token"].append(previous_token_score(attention))
        per_layer["first token"].append(first_token_score(attention))
        per_layer["self"].append(self_score(attention))
        per_layer["entropy"].append(row_entropy(attention[:, 2:]))
    entropy = np.stack(per_layer.pop("entropy"))
    scores = {role: np.stack(values) for role, values in per_layer.items()}
    repeated, start = induction_attention(session)
    scores["induction"] = np.stack([induction_score(a, start, INDUCTION_PERIOD) for a in repeated])
    if session.is_encoder_decoder:
        cross = [session.cross_attention(i) for i in range(session.config.n_layers)]  # (heads, T, S) each
        scores["alignment"] = np.stack([alignment_score(a) for a in cross])
    return HeadRoles(scores=scores, entropy=entropy, tags=assign_tags(scores), rows=n - 2)
