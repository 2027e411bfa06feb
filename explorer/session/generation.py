"""One user's generation, stepped: choose a token, append it, run it; undo; branch; fork.

``GenerationSession`` is what the page, the notebook and the tests hold. Every token in
``token_ids`` has been run through the model: the prompt when the session starts (the prefill,
``core.py``; a long one in chunks), each generated token right after it is chosen (``step.py``). So the
distribution for the next token is always ready, and the queries and keys of every token are
kept for attention (``attention_store.py``).

With the cache on, a step adds one query and one key per layer; with it off, a step reruns the
whole sequence and keeps only the new position's. Either way the attention matrix equals the one
a full forward pass gives (the tests check it).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from explorer.admission import PREFILL_CHUNK, between_chunks
from explorer.errors import InputError
from explorer.model.cache_policy import CachePolicy
from explorer.model.taps import Intervention
from explorer.session.core import MAX_SESSION_POSITIONS, SessionCore
from explorer.session.inputs import check_recorded_tokens, check_token_id
from explorer.session.results import StepResult
from explorer.session.step import Step, undo_last

__all__ = ["MAX_SESSION_POSITIONS", "GenerationSession"]


class GenerationSession(SessionCore):
    """Step through generation one token at a time; see what the model did at each step."""

    def step(self) -> StepResult:
        """Choose the next token (greedy or sampled), append it, and run the model on it."""
        return Step(self).run()

    def force(self, token_id: int) -> StepResult:
        """Append ``token_id`` instead of the model's choice (a branch); Undo goes back."""
        check_token_id(token_id, self.config)  # first: a token that cannot exist is refused in any state
        return Step(self, token_id, forced=True).run()

    def append_recorded(self, token_id: int, forced: bool) -> StepResult:
        """Append a token that an earlier run chose (a saved session or a shared link being
        restored), keeping whether the user had forced it."""
        check_token_id(token_id, self.config)
        return Step(self, token_id, forced=forced).run()

    def replay(self, token_ids: list[int], forced: set[int] | frozenset[int] = frozenset()) -> None:
        """Append generated tokens an earlier run chose, each run through the model; the
        tokens at the indices in ``forced`` are marked as the user's own choice. Refuses,
        before running anything, a list that could not have come from this model."""
        check_recorded_tokens(token_ids, self.max_positions - len(self.token_ids), self.max_positions, self.config)
        for i, token in enumerate(token_ids):
            if self.finished:
                raise InputError(f"Its tokens go on after the model's end token (generated token {i}): it was altered.")
            self.append_recorded(token, forced=i in forced)
            if (i + 1) % PREFILL_CHUNK == 0:  # inside a heavy job: Steps first, stop if its client left
                between_chunks()

    def replace_last(self, token_id: int) -> StepResult:
        """Put ``token_id`` in place of the last generated token (undo, then force it)."""
        if len(self.token_ids) <= self.prompt_length:
            raise InputError("There is no generated token to replace: Step first.")
        self.undo()
        return self.force(token_id)

    def undo(self) -> None:
        """Remove the last generated token (never the prompt); the one before it is run again."""
        undo_last(self)

    def started_again(self, **changes) -> GenerationSession:
        """A new session of this text with this session's settings (and interventions), but for
        ``changes`` (``text`` among them: another text); no token generated yet."""
        s = self.sampling
        settings = dict(
            use_cache=self.use_cache, chat=self.chat, record_attention="qk" in self.record,
            max_positions=self.max_positions, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, seed=s.seed,
            interventions=self.interventions, cache_policy=self.cache_policy,
        )  # fmt: skip
        text = changes.pop("text", self.text)
        return GenerationSession(self.loaded, text, **(settings | changes))

    def with_cache_policy(self, policy: CachePolicy | None) -> GenerationSession:
        """A new session with this one's text, settings and tokens (forced ones marked), each
        token run again under ``policy`` (None: the full cache). This session is untouched."""
        return self._with_these_tokens(self.started_again(cache_policy=policy, n_top=self.n_top))

    def _with_these_tokens(self, other: GenerationSession) -> GenerationSession:
        """``other`` (a new session of this text) stepped through this session's generated tokens."""
        forced = {s.position - self.prompt_length for s in self.steps if s.forced}
        other.replay(self.generated_ids, forced=forced)
        return other

    @property
    def can_fork(self) -> bool:
        """Whether ``fork`` may copy this session: not under a cache policy (its cache's entries
        are rewritten in place as keys are evicted)."""
        return not self.cache_plan.rewrites_entries()

    def fork(self) -> GenerationSession:
        """An independent session with this one's text, settings, tokens and history that shares
        its blocks of the model's stores (the cache, the kept queries and keys) until either
        writes into one (then that block is copied: 16 positions); no pass is run. A class
        following its teacher holds one cache this way, not thirty. Refused under a cache policy."""
        if not self.can_fork:
            raise ValueError("a session under a cache policy is not forked: replay its tokens instead")
        other = copy.copy(self)  # settings, the model, the logits (never written in place)
        self.loaded.used_by(other)
        other.token_ids, other._token_texts = list(self.token_ids), list(self._token_texts)
        other.steps, other.timings = list(self.steps), list(self.timings)
        other.cache = self.cache.fork() if self.cache is not None else None
        borrowed = self.attention.self_inputs.kept.borrows(self.held_keys())  # the kept keys are the cache's
        other.attention = self.attention.fork(other.held_keys() if borrowed else None)
        return other

    def with_interventions(self, interventions: Sequence[Intervention]) -> GenerationSession:
        """A branch: a new session whose passes make these changes at the model's taps, with this
        session's text, settings and tokens, each token rerun under them (forced ones stay
        marked). It steps on from there under the interventions; this session is untouched."""
        return self._with_these_tokens(self.started_again(interventions=interventions, n_top=self.n_top))
