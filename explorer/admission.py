"""Heavy work is admitted here, in one place, so that no visitor can take the whole CPU.

Heavy work is whatever runs the model over many positions at once: a prefill of a long text, a
restored session's tokens, Compare, the budget curve and the lab's runs, a two-models read, a
model's first load, an API call over a long text. Three rules hold it:

- **One heavy job per client at a time** (its address): a second one waits in line until the
  first has finished (a class behind one school router shares an address: its long texts take
  turns), and past ``DECODER_EXPLORER_HEAVY_PER_CLIENT`` jobs running or waiting (default 4) a
  client's next one is refused with a sentence (``HeavyJobRefused``), so that one client holds few
  of the server's threads waiting or working on heavy work.
- **A global limit** (``DECODER_EXPLORER_HEAVY_JOBS``, default 1: a pass over many positions
  already uses every core) and a bounded waiting list (``DECODER_EXPLORER_HEAVY_WAITING``,
  default 8): a job past both is refused ("try again in a minute"); a job that waits is told
  where it waits (``told``: "Waiting for 2 other long jobs…").
- **Short Steps first**: a heavy job runs in chunks (``explorer/session/cache_plan.py`` cuts a
  long prefill into passes of ``PREFILL_CHUNK`` positions) and, between two chunks, waits while
  the step batcher (``explorer/batching.py``) has Steps to run (``STEPS_FIRST``), at most
  ``MAX_YIELD_S`` a chunk so that a class stepping without pause cannot starve it. A job whose
  client has gone (``gone()``: a closed tab, a dropped connection) is cancelled at the next chunk
  (``JobCancelled``).

Nothing here knows Gradio: the page passes ``gone`` and ``told`` (``explorer/ui/heavy.py``); the
session's passes call ``between_chunks`` (a no-op outside a heavy job).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from explorer.errors import InputError

log = logging.getLogger("decoder_explorer")

PREFILL_CHUNK = 128  # positions a pass of a long prefill processes; other visitors' Steps go between passes
HEAVY_POSITIONS = 256  # a pass (or a replay) over more positions than this is heavy work
MAX_YIELD_S = 1.0  # the longest a chunk waits for Steps to finish before it runs anyway
WAIT_POLL_S = 0.25  # how often a waiting job looks whether its client is still there


class HeavyJobRefused(InputError):
    """A heavy job that cannot be admitted now: the client runs one already, or too many wait."""


class JobCancelled(InputError):
    """A heavy job whose client has gone, stopped at its next chunk (nobody is left to tell)."""


def setting(name: str, default: int, low: int, high: int) -> int:
    """A whole-number setting from the environment, within ``low`` .. ``high``; else ``default``."""
    try:
        value = int(os.environ.get(name, default))
    except ValueError:
        return default
    return min(max(value, low), high)


# ---------------------------------------------------------------- Steps first
class StepsFirst:
    """How many Steps the step batcher holds (waiting or running); heavy work waits for none."""

    def __init__(self) -> None:
        self._pending = 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """Count one Step while it waits for its batch and runs."""
        with self._changed:
            self._pending += 1
        try:
            yield
        finally:
            with self._changed:
                self._pending -= 1
                self._changed.notify_all()

    @property
    def pending(self) -> int:
        return self._pending

    def wait_for_none(self, timeout: float = MAX_YIELD_S) -> bool:
        """Wait until no Step is pending, at most ``timeout`` s; whether none is."""
        with self._changed:
            return self._changed.wait_for(lambda: self._pending == 0, timeout)


STEPS_FIRST = StepsFirst()


# ---------------------------------------------------------------- the admission
@dataclass
class Job:
    """One admitted (or waiting) heavy job: whose, what, and how to know its client has gone."""

    client: str
    what: str
    gone: Callable[[], bool] = lambda: False
    cancelled: bool = field(default=False)

    def check(self) -> None:
        """Raise ``JobCancelled`` if the job's client has gone."""
        if self.cancelled or self.gone():
            if not self.cancelled:
                log.info("cancelled %s: its client has gone", self.what[:80])
            self.cancelled = True
            raise JobCancelled(f"{self.what} was cancelled: its client has gone.")


_current: contextvars.ContextVar[Job | None] = contextvars.ContextVar("heavy_job", default=None)


class Admission:
    """At most ``limit`` heavy jobs run at once, at most one per client; ``waiting`` more wait, at most
    ``per_client`` of one client's running and waiting."""

    def __init__(self, limit: int | None = None, waiting: int | None = None, per_client: int | None = None) -> None:
        self.limit = limit if limit is not None else setting("DECODER_EXPLORER_HEAVY_JOBS", 1, 1, 64)
        self.max_waiting = waiting if waiting is not None else setting("DECODER_EXPLORER_HEAVY_WAITING", 8, 0, 1024)
        self.per_client = (
            per_client if per_client is not None else setting("DECODER_EXPLORER_HEAVY_PER_CLIENT", 4, 1, 64)
        )
        self._lock = threading.Condition()
        self._running: list[Job] = []
        self._waiting: list[Job] = []

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @contextlib.contextmanager
    def heavy(
        self, client: str, what: str, gone: Callable[[], bool] = lambda: False,
        told: Callable[[str], None] = lambda message: None,
    ) -> Iterator[Job]:  # fmt: skip
        """Run the block as ``client``'s heavy job ``what`` (a phrase: "A prefill of 900 tokens"):
        admitted at once, or after a wait (``told`` where it waits), or refused. Inside another
        heavy job of the same thread it is part of that job (a Compare's two prefills)."""
        outer = _current.get()
        if outer is not None:
            outer.check()
            yield outer
            return
        job = Job(client, what, gone)
        self._enter(job, told)
        token = _current.set(job)
        try:
            yield job
        finally:
            _current.reset(token)
            with self._lock:
                self._running.remove(job)
                self._lock.notify_all()

    def _enter(self, job: Job, told: Callable[[str], None]) -> None:
        with self._lock:
            held = sum(other.client == job.client for other in self._running + self._waiting)
            if held >= self.per_client:
                raise HeavyJobRefused(
                    f"Your address already has {held} long job(s) running or waiting (a long text, Compare or a "
                    "lab run; a class behind one router shares an address): wait for one to finish, then try again."
                )
            if self._may_start(job) and not self._waiting:
                self._running.append(job)
                return
            if len(self._waiting) >= self.max_waiting:
                raise HeavyJobRefused(
                    f"The server is busy with {len(self._running) + len(self._waiting)} long jobs: "
                    "try again in a minute, or with a shorter text."
                )
            self._waiting.append(job)
        told(f"Waiting for {self._ahead(job)} other long job(s) to finish…")
        try:
            self._wait_turn(job)
        finally:
            with self._lock:
                if job in self._waiting:
                    self._waiting.remove(job)
                    self._lock.notify_all()

    def _may_start(self, job: Job) -> bool:
        """Whether a place is free for ``job``: under the limit, and no job of its client runs."""
        return len(self._running) < self.limit and all(other.client != job.client for other in self._running)

    def _ahead(self, job: Job) -> int:
        with self._lock:
            return len(self._running) + (self._waiting.index(job) if job in self._waiting else 0)

    def _wait_turn(self, job: Job) -> None:
        """Wait until ``job`` is the first in line that may start (checking its client is there)."""
        while True:
            with self._lock:
                if next((other for other in self._waiting if self._may_start(other)), None) is job:
                    self._waiting.remove(job)
                    self._running.append(job)
                    self._lock.notify_all()
                    return
                self._lock.wait(WAIT_POLL_S)
            job.check()


ADMISSION = Admission()


def current_job() -> Job | None:
    """The heavy job this thread runs, or None."""
    return _current.get()


def between_chunks() -> None:
    """Called by a pass over many positions between two chunks: inside a heavy job, stop if its
    client has gone, and let the Steps waiting in the batcher run first. Outside one, nothing."""
    job = _current.get()
    if job is None:
        return
    job.check()
    started = time.perf_counter()
    if not STEPS_FIRST.wait_for_none(MAX_YIELD_S):
        log.debug("a heavy chunk ran after %.2f s of Steps", time.perf_counter() - started)
    job.check()
