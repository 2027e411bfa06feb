"""Stepping. One step of generation, whole: choose the token, put it at the end, run the pass, take in what
it gave, time it, record it; and, if the pass fails, put the session back as it was.

A step alone (``Step.run``) and the steps of many sessions in one batched pass (``run_together``,
which ``explorer/batching.py`` calls) go through this one object, so a batched step is exactly the
step the session would have had alone, and no code outside this package writes a session's fields.
``undo_last`` takes a step back.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from explorer.errors import InputError
from explorer.model import CacheBatch, Output, Record, Trace, batch_of
from explorer.model.trace import residual_stream_names
from explorer.session.kept_inputs import keep_batch
from explorer.session.results import StepResult, StepTiming, timed
from explorer.tokens import continuation_texts_of_rows, piece_text

if TYPE_CHECKING:
    from explorer.session.core import SessionCore


class Step:
    """One step of one session, begun: the token is chosen (``token``, or the session's own
    choice) and put at the end; ``run`` (alone) or ``run_together`` (batched) finishes it."""

    def __init__(self, session: SessionCore, token: int | None = None, forced: bool = False) -> None:
        session.check_can_step()
        self.session, self.forced = session, forced
        self.token = session.next_choice() if token is None else int(token)
        self.top = session.top_candidates()  # the distribution the token was chosen from
        self._length = len(session.token_ids)
        self._cached = session.cache.length if session.cache is not None else None
        session.token_ids.append(self.token)

    def run(self) -> StepResult:
        """This step alone: the session's own pass over the new token (cache off: over everything)."""
        try:
            output, elapsed_ms = self.session.pass_over_newest(1)
        except BaseException:
            self.rollback()
            raise
        self.session.absorb(output.logits[0, -1], output.trace, 1)
        return self.finish(output.trace, elapsed_ms)

    def finish(self, trace: Trace, elapsed_ms: float) -> StepResult:
        """Record the step, once the session has taken in what its pass gave (``trace``: batch 1)."""
        session = self.session
        position = len(session.token_ids) - 1
        session.timings.append(StepTiming(position, elapsed_ms, session.use_cache))
        session._token_texts.append(self._token_text(position))
        result = StepResult(
            token_id=self.token,
            token_text=session._token_texts[-1],
            position=position,
            elapsed_ms=elapsed_ms,
            cache_bytes=session.cache_bytes,
            use_cache=session.use_cache,
            top_k=self.top,
            trace=trace,
            forced=self.forced,
            finished=session.finished,
        )
        # The session keeps each step's result without its trace: a step's attention is already
        # kept as queries and keys, and a copy of its probabilities per step would grow quadratically.
        session.steps.append(replace(result, trace=Trace()))
        return result

    def _token_text(self, position: int) -> str:
        """The text the token adds: its candidate's, where it was among them (the same decode)."""
        for candidate in self.top:
            if candidate.token_id == self.token:
                return candidate.text
        return piece_text(self.session.tokenizer, self.session.token_ids, position)

    def rollback(self) -> None:
        """Undo what the step began: its token, and whatever the failed pass put in the cache."""
        del self.session.token_ids[self._length :]
        if self.session.cache_plan.rewrites_entries():  # what the pass evicted is gone: the kept tokens are run again
            self.session.rebuild_cache()
        elif self._cached is not None:
            self.session.cache.truncate(self._cached)


def run_together(steps: list[Step]) -> list[StepResult]:
    """One pass for the begun steps of many sessions (same model and record, cached, past the
    prefill): row b reads step b's token over its own session's cache. If the pass fails, every
    session is put back as it was and the error raised."""
    first = steps[0].session
    ids = torch.tensor([[step.token] for step in steps], device=first.model_device)  # (B, 1)
    try:
        cache = batch_of([step.session.cache for step in steps])
        record = _batch_record([step.session for step in steps])
        output, elapsed_ms = timed(lambda: _batched_pass(first, ids, cache, record), first.model_device)
    except BaseException:
        for step in steps:
            step.rollback()
        raise
    _take_in_together([step.session for step in steps], output)
    # The batch's pass is shared by its sessions: each step records its time.
    return [step.finish(output.trace.row(b), elapsed_ms) for b, step in enumerate(steps)]


def choose_together(sessions: list[SessionCore]) -> list[int | None]:
    """What each session's step begins with, from one stack of the batch's next-token logits: its
    top candidates (what the step records) and, where it is greedy, its token (None where it
    samples: it draws with its own seed). Row by row the same as each alone."""
    logits = torch.stack([session._next_logits for session in sessions]).float()  # (B, vocab)
    _know_tops(sessions, logits)
    greedy = [b for b, session in enumerate(sessions) if session.sampling.greedy]
    choices: list[int | None] = [None] * len(sessions)
    # An argmax, row by row or of the stack, takes the first of equal maxima: the same tokens.
    for b, token in zip(greedy, logits[greedy].argmax(-1).tolist(), strict=True):
        choices[b] = token
    return choices


def _know_tops(sessions: list[SessionCore], logits: torch.Tensor) -> None:
    """The top candidates of the sessions whose page has not asked for them already, in one
    softmax, one top-k and one decode of their texts per size of list; ``logits`` (B, vocab)."""
    unknown = [b for b, session in enumerate(sessions) if not session.knows_top(session.n_top)]
    for k in {sessions[b].n_top for b in unknown}:
        rows = [b for b in unknown if sessions[b].n_top == k]
        values, ids = logits[rows].softmax(-1).topk(k)  # (R, k) each
        contexts = [sessions[b].token_ids for b in rows]
        texts = continuation_texts_of_rows(sessions[0].tokenizer, contexts, ids.tolist())
        for i, b in enumerate(rows):
            sessions[b].know_top(k, values[i], ids[i], texts[i])


def _batch_record(sessions: list[SessionCore]) -> Record:
    """What the batched pass keeps: what any of its sessions' steps keeps (a session under a
    quantized cache keeps no queries and keys; the others' rows do)."""
    records = [session.step_record(1) for session in sessions]
    return Record(frozenset().union(*(r.kinds for r in records)), frozenset().union(*(r.names for r in records)))


def _take_in_together(sessions: list[SessionCore], output: Output) -> None:
    """What each session takes in from row b of a batched pass, for the whole batch at once:
    the next logits, the residual streams (one stack), the kept queries and keys (one write per
    layer, ``keep_batch``). Only a translator's cross-attention queries are kept row by row."""
    trace, first = output.trace, sessions[0]
    logits = output.logits[:, -1].cpu()  # (B, vocab)
    residuals = None
    if "residual" in trace.record:
        names = residual_stream_names(first.config.n_layers)
        residuals = torch.stack([trace[name][:, -1] for name in names], dim=1)  # (B, layers + 1, d)
    keeping = [b for b, session in enumerate(sessions) if "qk" in session.record]
    if keeping:
        kept = [sessions[b].attention.self_inputs.kept for b in keeping]
        cache_keys = [sessions[b].held_keys() for b in keeping]
        keep_batch(kept, trace, first.config.n_layers, batch_rows=keeping, cache_keys=cache_keys)
    for b, session in enumerate(sessions):
        session.take_in(logits[b], None if residuals is None else residuals[b])
        if "qk" in session.record and first.is_encoder_decoder:
            session.attention.keep_cross(trace.row(b), 1)


@torch.inference_mode()
def _batched_pass(first: SessionCore, ids: torch.Tensor, cache: CacheBatch, record: Record) -> Output:
    """(B, 1) ids through the model. Only the pass runs in inference mode, as a step alone does:
    what the sessions keep (grown outside it) must stay writable by their later steps."""
    if first.is_encoder_decoder:  # the sources were read at each session's prefill (their caches hold them)
        return first.model(ids, None, cache=cache, record=record, last_only=True)
    return first.model(ids, cache=cache, record=record, last_only=True)


def undo_last(session: SessionCore) -> None:
    """Remove the session's last generated token (never the prompt) and what its step recorded.

    The distribution for the next position came from processing the token now last, so that one
    token is run again (its attention row is dropped and recorded again; its cache entry rewritten)."""
    if len(session.token_ids) <= session.prompt_length:
        raise InputError("Nothing to undo: only the prompt is left.")
    session.token_ids.pop()
    session._token_texts.pop()
    session.steps.pop()
    session.timings.pop()
    kept = len(session.token_ids) - 1
    if session.cache_plan.rewrites_entries():  # an evicted entry cannot be taken back: the tokens kept are run again
        session.rebuild_cache()
        return
    session.attention.truncate(kept)
    if session.cache is not None:
        session.cache.truncate(kept)
    session._process(1)
