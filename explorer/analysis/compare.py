"""Compare two runs of one model: where their tokens part, and how far apart their predictions are.

Run A is the session on screen; run B is a branch of it (heads switched off, another text,
other sampling settings, the cache off, the full cache beside a cache policy), which generated
as many tokens as A did. Their new tokens are aligned step by step: step k is the k-th token
each run generated. At every step, each run's next-token distribution (the model's own
probabilities, before temperature, top-k and top-p) gives

- the probability A gave B's token, and B gave A's (1 and 1 where they chose the same token
  with certainty; a low number where one run would hardly have said the other's word);
- the KL divergence KL(A ‖ B) = Σ_v p_A(v) log(p_A(v) / p_B(v)), in nats: 0 when the two
  predictions are the same.

The attention of both runs is compared position by position over the positions they share:
A's map minus B's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from explorer.errors import InputError
from explorer.session import GenerationSession
from explorer.tokens import visible


@dataclass
class Comparison:
    a: GenerationSession
    b: GenerationSession
    tokens_a: list[str]  # each run's generated tokens, step by step
    tokens_b: list[str]
    p_a_of_b: np.ndarray  # (steps,) the probability run A gave run B's token at that step
    p_b_of_a: np.ndarray  # (steps,)
    p_a_of_a: np.ndarray  # (steps,) each run's probability of its own token
    p_b_of_b: np.ndarray
    kl: np.ndarray  # (steps,) KL(A ‖ B) of the two next-token distributions, nats
    label: str = ""  # what run B is ("with the KV cache off")

    @property
    def steps(self) -> int:
        return len(self.kl)

    @property
    def same(self) -> list[bool]:
        return [x == y for x, y in zip(self.a.generated_ids, self.b.generated_ids, strict=False)][: self.steps]

    @property
    def departs_at(self) -> int | None:
        """The first step where the two runs chose different tokens (None: the same throughout)."""
        return next((k for k, same in enumerate(self.same) if not same), None)

    def summary(self) -> str:
        if self.steps == 0:
            return "Neither run has generated a token yet: press Step (or Generate) first."
        where = self.departs_at
        if where is None:
            parted = f"the same {self.steps} tokens"
        else:
            before = f"the same tokens for {where} steps, then" if where else "different tokens from the first step:"
            a, b = visible(self.tokens_a[where]), visible(self.tokens_b[where])
            parted = f"{before} part at step {where + 1} ({a!r} against {b!r})"
        run_b = f"Run B is run A {self.label}. " if self.label else ""
        if self.kl.max() < 1e-4:
            apart = f"Their predictions are the same at every step (largest KL {self.kl.max():.1e} nats)."
        else:
            apart = (
                f"Their predictions differ most at step {int(self.kl.argmax()) + 1} (KL {self.kl.max():.3f} nats; "
                f"mean {self.kl.mean():.3f})."
            )
        return f"{run_b}Over {self.steps} steps the two runs chose {parted}. {apart}"

    def attention_difference(self, layer: int, head: int | None) -> np.ndarray:
        """(n, n) A's self-attention minus B's over their first n shared positions (``head``
        None: the head average)."""
        n = min(len(self.a.token_ids), len(self.b.token_ids))
        maps = []
        for run in (self.a, self.b):
            probs = run.self_attention(layer, 0, n)[:, :, :n]  # (heads, n, n)
            maps.append(probs.mean(0) if head is None else probs[head])
        return maps[0] - maps[1]


def _step_distributions(session: GenerationSession) -> torch.Tensor:
    """(steps, vocab) the probabilities the model gave each generated token's position. A session
    under a cache policy is read again under it, a token a step (a parallel pass would be the
    full cache's)."""
    if session.cache_plan.under_policy:
        again = session.started_again(record_attention=False)
        rows = []
        for token in session.generated_ids:
            rows.append(again.next_token_probabilities())
            again.force(token)
        return torch.stack(rows) if rows else torch.zeros((0, session.config.vocab_size))
    logits = session.full_pass().logits[0].float()  # (T, vocab)
    first = session.prompt_length - 1  # the position that chose the first generated token
    return torch.softmax(logits[first : len(session.token_ids) - 1], dim=-1)


def compare(a: GenerationSession, b: GenerationSession, label: str = "") -> Comparison:
    """Compare two runs of the same model, step by step over the steps both have taken."""
    if a.loaded is not b.loaded:
        raise InputError("Both runs must be of the same model.")
    steps = min(len(a.generated_ids), len(b.generated_ids))
    dist_a, dist_b = _step_distributions(a)[:steps], _step_distributions(b)[:steps]  # (steps, vocab)
    ids_a = torch.tensor(a.generated_ids[:steps], dtype=torch.long)
    ids_b = torch.tensor(b.generated_ids[:steps], dtype=torch.long)
    rows = torch.arange(steps)
    log_a, log_b = dist_a.clamp_min(1e-30).log(), dist_b.clamp_min(1e-30).log()
    kl = (dist_a * (log_a - log_b)).sum(-1).clamp_min(0)  # (steps,)
    texts_a, texts_b = a.token_texts()[a.prompt_length :], b.token_texts()[b.prompt_length :]
    return Comparison(
        a=a, b=b, tokens_a=texts_a[:steps], tokens_b=texts_b[:steps],
        p_a_of_b=dist_a[rows, ids_b].numpy(), p_b_of_a=dist_b[rows, ids_a].numpy(),
        p_a_of_a=dist_a[rows, ids_a].numpy(), p_b_of_b=dist_b[rows, ids_b].numpy(), kl=kl.numpy(), label=label,
    )  # fmt: skip


BRANCHES = {
    "switched-off": "with the heads switched off (the Switch heads off tab's choice)",
    "text": "with another text",
    "sampling": "with other sampling settings",
    "cache-off": "with the KV cache off",
    "full-cache": "with the full cache (run A under a cache policy: the KV-cache lab's 'Switch this session to it')",
}


def branch_of(session: GenerationSession, kind: str, **settings) -> GenerationSession:
    """Run B: ``session`` started again with one thing changed, then stepped as many times as
    ``session`` has generated (it chooses its own tokens; it stops early if its text ends).

    ``settings``: ``interventions`` for "switched-off", ``text`` for "text", ``temperature``,
    ``top_k``, ``top_p``, ``seed`` for "sampling"."""
    if kind == "switched-off":
        if not settings.get("interventions"):
            raise InputError("Nothing is switched off: choose heads in the Switch heads off tab first.")
        b = session.started_again(interventions=settings["interventions"])
    elif kind == "text":
        if not (settings.get("text") or "").strip():
            raise InputError("Type run B's text first.")
        b = session.started_again(text=settings["text"])
    elif kind == "sampling":
        b = session.started_again(**{k: settings[k] for k in ("temperature", "top_k", "top_p", "seed")})
    elif kind == "cache-off":
        b = session.started_again(use_cache=False, cache_policy=None)
    elif kind == "full-cache":
        if not session.cache_plan.under_policy:
            raise InputError(
                "Run A keeps the full cache already: choose a policy and press 'Switch this session to it' "
                "in the KV cache tab."
            )
        b = session.started_again(cache_policy=None)
    else:
        raise InputError(f"compare with {kind!r}? Choose one of {', '.join(BRANCHES)}")
    for _ in range(len(session.generated_ids)):
        if b.finished or len(b.token_ids) >= b.max_positions:
            break
        b.step()
    return b
