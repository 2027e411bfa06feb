"""Step many sessions at once: what lets a class share one CPU.

A cached step of a small model is bound by reading its weights, so the steps of several users
run as one batch cost little more than one step (``bench/bench_load.py`` prints the curve).
``step_together`` steps a list of sessions: those that can (a cached one-token step, no
intervention, the same model and record) share one pass, each row attending over its own cache
(``explorer/model/batch.py``); each chooses its token with its own settings and seed first, so
every session gets exactly the step it would have had alone. A session that cannot step (its
text ended, no room left) gets its error; the others are not disturbed.

``StepBatcher`` is the server's side: each user's Step waits in it, and one worker thread takes
everything waiting, steps it together, and hands each user its own result. Heavy work (a long
prefill) runs in chunks and waits between two while Steps are pending (``explorer/admission.py``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

from explorer import native_memory
from explorer.admission import STEPS_FIRST
from explorer.session import GenerationSession, Step, StepResult, choose_together, run_together

MAX_BATCH = 32
log = logging.getLogger("decoder_explorer")


@dataclass
class BatchStats:
    """What the batcher really ran: the size of each batched pass that succeeded, and how many
    batched passes failed and fell back to stepping each session alone (a bug: see the log)."""

    batches: list[int] = field(default_factory=list)
    fell_back: int = 0


def step_together(
    sessions: Sequence[GenerationSession], stats: BatchStats | None = None
) -> list[StepResult | Exception]:
    """Step each session once; returns each one's StepResult, or the error that stopped it."""
    results: list[StepResult | Exception | None] = [None] * len(sessions)
    groups: dict[tuple, list[int]] = {}
    batched: set[int] = set()
    for i, session in enumerate(sessions):
        try:
            session.check_can_step()
        except Exception as error:  # this session's own refusal, handed back to it
            results[i] = error
            continue
        # A session asked for twice steps twice, the second time alone (a batch holds a cache once).
        if can_join_batch(session) and id(session) not in batched:
            batched.add(id(session))
            # Sessions that keep the queries and keys and those that do not (a quantized cache) share a pass.
            key = (id(session.loaded), replace(session.record, kinds=session.record.kinds - {"qk"}))
        else:
            key = ("alone", i)
        groups.setdefault(key, []).append(i)
    for members in groups.values():
        group = [sessions[i] for i in members]
        for i, result in zip(members, _step_group(group, stats), strict=True):
            results[i] = result
    return results


def can_join_batch(session: GenerationSession) -> bool:
    """Whether the session's next step may run in a batch with other sessions': a cached one-token
    step under no intervention (a cache policy too: its rows attend apart, ``model/batch.py``), of a
    model without relative positions (each row of a batch would need its own bias: T5 steps alone)."""
    relative = session.config.positions == "relative"
    return session.use_cache and session.cache is not None and not session.interventions and not relative


def _step_group(group: list[GenerationSession], stats: BatchStats | None = None) -> list[StepResult | Exception]:
    if len(group) > 1:
        try:
            results = batched_step(group)
        except Exception:  # a bug in the batched pass: logged with its cause and counted, then each steps alone
            log.exception("a batched step of %d sessions failed; each steps alone", len(group))
            if stats is not None:
                stats.fell_back += 1
        else:
            if stats is not None:
                stats.batches.append(len(group))
            return results
    return [_step_alone(session) for session in group]


def _step_alone(session: GenerationSession) -> StepResult | Exception:
    try:
        return session.step()
    except Exception as error:  # handed back to the user whose step it was
        return error


def batched_step(group: list[GenerationSession]) -> list[StepResult]:
    """One pass for every session of ``group`` (same model and record, cached, past the prefill):
    each begins its own step (choosing its token), and the steps run together. Leaves every
    session as it was if the pass fails."""
    steps: list[Step] = []
    choices = choose_together(group)
    try:
        for session, token in zip(group, choices, strict=True):
            steps.append(Step(session, token))
    except BaseException:
        for step in steps:
            step.rollback()
        raise
    return run_together(steps)


@dataclass
class _Request:
    session: GenerationSession
    result: Future


class StepBatcher:
    """A Step from any user waits here; one worker thread steps everything waiting together.

    While a batch runs, the next requests gather, so under load the batches grow by themselves
    and with one user a Step waits for nothing. ``max_batch`` bounds a batch (and its memory).
    """

    def __init__(self, max_batch: int = MAX_BATCH) -> None:
        self.max_batch = max_batch
        self._waiting: list[_Request] = []
        self._ready = threading.Condition()
        self._worker: threading.Thread | None = None
        self.stats = BatchStats()  # the batched passes that ran, and those that fell back (benchmarks, tests)

    def step(self, session: GenerationSession) -> StepResult:
        """Step ``session`` (in a batch with whoever else is waiting); raises its own error."""
        request = _Request(session, Future())
        with STEPS_FIRST.step():  # counted while it waits and runs: a heavy job's next chunk waits for it
            with self._ready:
                self._start_worker()
                self._waiting.append(request)
                self._ready.notify()
            result = request.result.result()
        if isinstance(result, Exception):
            raise result
        return result

    def _start_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._run, name="step-batcher", daemon=True)
            self._worker.start()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._waiting:
                    self._ready.wait()
                batch, self._waiting = self._waiting[: self.max_batch], self._waiting[self.max_batch :]
            started = time.perf_counter()
            try:
                with native_memory.hot_path():  # no malloc_trim starts during the pass
                    results = step_together([request.session for request in batch], self.stats)
            except Exception as error:  # never leave a user waiting forever
                results = [_own_copy(error) for _ in batch]  # each thread raises its own
            if os.environ.get("DECODER_EXPLORER_PROFILE"):  # the benchmarks: how big the passes were, how long
                ms = (time.perf_counter() - started) * 1000
                log.info("profile batch %d sessions %.1f ms (alone: %d)", len(batch), ms, self.stats.fell_back)
            for request, result in zip(batch, results, strict=True):
                request.result.set_result(result)


def _own_copy(error: Exception) -> Exception:
    """A copy of ``error`` for one waiting thread, ``error`` its cause: one exception object
    raised in many threads at once would gather all their tracebacks and contexts."""
    try:
        own = type(error).__new__(type(error), *error.args)  # no __init__: its arguments may differ
        own.__dict__.update(vars(error))
    except Exception:  # an exception that cannot be copied: the one object, as before
        return error
    own.__cause__ = error
    return own
