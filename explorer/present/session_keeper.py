"""Every tab's session with a life and a place in a budget (issue 58, item 2).

A session holds the model's keys and values and the queries and keys its attention views are
computed from: ~145 MB for 1,000 SmolLM2 tokens. A browser tab's is freed when Gradio says the
tab closed, but a client without a browser's heartbeat (a raw queue client, an API caller) never
closes: 20 of them held 2.9 GB, freed never. So the server keeps every session on three limits:

- **an idle time** (``--session-idle-minutes``, default 30): a session untouched that long is
  released, its tensors and its tokens. The page's browser keeps its own copy of the session, which a
  reload brings back; an event that comes after says so (``ENDED``).
- **a memory budget** for all sessions together (``--session-memory-mb``): past it, the least
  recently used *idle* session is put aside, its tensors let go and its tokens kept (a
  ``Snapshot``, the tab's layer, head and query untouched). Its next event reads the tokens again
  before it runs (``snapshot.restore``: same tokens, same view) and the status line says so. Like a
  browser discarding a background tab, or vLLM preempting a request by recomputation.
- **a number of live sessions per client address** (``--sessions-per-address``, default 20: a
  class behind one school's address): past it, that address's least recently used idle session is
  put aside the same way. Nothing is refused.

A session is idle when no event of its tab runs: ``using`` marks the events, and the keeper
takes a tab's lock only when it is free (never waiting for it), so it never puts aside or releases
a session while its tab steps, and never holds up a tab's event.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from explorer.analysis.snapshot import restore, snapshot_of
from explorer.present import model_store

if TYPE_CHECKING:
    from explorer.present.views import ExplorerState

log = logging.getLogger("decoder_explorer")

MEMORY_ENV = "DECODER_EXPLORER_SESSION_MEMORY_MB"
IDLE_ENV = "DECODER_EXPLORER_SESSION_IDLE_MINUTES"
PER_ADDRESS_ENV = "DECODER_EXPLORER_SESSIONS_PER_ADDRESS"
# A 16 GB Space: ~2 GB of models (SmolLM2, Gemma 3 270M, the translator), ~1.5 GB of Python,
# Gradio and torch, Gemma's first conversion ~1.6 GB at its peak, and room for the allocator's
# slack: 6 GB of sessions is ~40 SmolLM2 sessions of 1,000 tokens, or ~500 of 100.
MEMORY_MB = 6000
IDLE_MINUTES = 30.0
PER_ADDRESS = 20
SWEEP_EVERY_S = 60.0  # at most; a short idle time is looked at more often (a quarter of it)

PUT_ASIDE = (
    "Your session was put aside to make room for other visitors, and has been read again from its "
    "{n:,} tokens: it is as you left it."
)
ENDED = (
    "This page's session was closed after {minutes} without use, to make room for other visitors. "
    "Reload the page to bring it back (your browser kept it), or choose a model to start again."
)


def _number(env: str, default: float, smallest: float) -> float:
    try:
        value = float(os.environ.get(env) or default)
    except ValueError:
        log.warning("%s=%r is not a number: %s is used", env, os.environ.get(env), default)
        return default
    return max(value, smallest)


def memory_budget_bytes() -> int:
    return int(_number(MEMORY_ENV, MEMORY_MB, 1) * 2**20)


def idle_seconds() -> float:
    return _number(IDLE_ENV, IDLE_MINUTES, 0.01) * 60


def sessions_per_address() -> int:
    return int(_number(PER_ADDRESS_ENV, PER_ADDRESS, 1))


def minutes_said(seconds: float) -> str:
    minutes = seconds / 60
    if minutes >= 1:
        return f"{minutes:.0f} minute{'' if round(minutes) == 1 else 's'}"
    return f"{seconds:.0f} seconds"


def session_bytes(st: ExplorerState) -> int:
    """What the tab's session holds (0 without one): its cache and kept queries and keys."""
    return st.session.held_bytes() if st.session is not None else 0


class SessionKeeper:
    """The server's sessions, by tab, on an idle time, a memory budget and a cap per address.

    ``clock`` is ``time.monotonic`` (a test passes one it can advance). ``on_end(key)`` is called
    for each tab released after its idle time (the page drops Gradio's own copy of its state)."""

    def __init__(
        self,
        memory_bytes: int | None = None,
        idle_s: float | None = None,
        per_address: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.configure()
        self.memory_bytes = memory_bytes if memory_bytes is not None else self.memory_bytes
        self.idle_s = idle_s if idle_s is not None else self.idle_s
        self.per_address = per_address if per_address is not None else self.per_address
        self.clock = clock
        self.on_end: list[Callable[[str], None]] = []
        self.tabs: weakref.WeakValueDictionary[str, ExplorerState] = weakref.WeakValueDictionary()
        self.lock = threading.Lock()  # the keeper's own books; a tab's lock is only ever tried
        self.put_aside_count = self.ended_count = 0

    def configure(self) -> None:
        """The limits as the environment says them (the command line sets it before the app starts)."""
        self.memory_bytes, self.idle_s, self.per_address = memory_budget_bytes(), idle_seconds(), sessions_per_address()

    # ------------------------------------------------------------ a tab's events
    def track(self, st: ExplorerState, key: str, address: str) -> None:
        """Count ``st`` (the tab ``key``, from ``address``) among the server's sessions."""
        life = st.life
        life.key, life.address = key, address
        with self.lock:
            self.tabs[key] = st
        if not life.last_used:
            life.last_used = self.clock()

    def forget(self, key: str) -> None:
        """The tab closed (Gradio's unload): its session is released by the page."""
        with self.lock:
            self.tabs.pop(key, None)

    @contextlib.contextmanager
    def using(self, st: ExplorerState | None) -> Iterator[None]:
        """Around one event of a tab (a Generate's whole run): the session is not idle meanwhile, and
        the limits are kept after. The event calls ``ready`` in its tab's lock before it reads the session."""
        if st is None:
            yield
            return
        life = st.life
        with self.lock:
            life.events += 1
            if life.key and life.key not in self.tabs:  # released after its idle time, and used again
                self.tabs[life.key] = st
        try:
            yield
        finally:
            with self.lock:
                life.events -= 1
                life.last_used = self.clock()
            self.keep_limits(st)

    def ready(self, st: ExplorerState | None) -> None:
        """In the tab's lock, before its event reads the session: a session put aside is read again."""
        if st is None:
            return
        st.life.notice = None
        if st.life.put_aside is not None and st.session is None:
            self.bring_back(st)

    def bring_back(self, st: ExplorerState) -> None:
        """Read a put-aside session again from its tokens, before the event that wants it runs."""
        snap = st.life.put_aside
        loaded = model_store.get_model(st.model_name)
        session = restore(loaded, snap)
        st.session, st.life.put_aside = session, None
        st.life.notice = PUT_ASIDE.format(n=len(session.token_ids))
        log.info("a session put aside was read again from its %d tokens", len(session.token_ids))

    # ------------------------------------------------------------ the limits
    def keep_limits(self, used: ExplorerState | None = None) -> None:
        """Past the address's cap or the memory budget, put aside least recently used idle sessions
        (never ``used``, whose event just ended: a session larger than the budget alone would be read
        again at each of its events)."""
        if used is not None and used.life.address:
            live = self.live(used.life.address)
            over = len(live) - self.per_address
            for st in live:
                if over <= 0:
                    break
                if st is not used and self.put_aside(st):
                    over -= 1
        live = self.live()
        held = sum(session_bytes(st) for st in live)
        for st in live:
            if held <= self.memory_bytes:
                break
            bytes_now = session_bytes(st)
            if st is not used and self.put_aside(st):
                held -= bytes_now

    def live(self, address: str | None = None) -> list[ExplorerState]:
        """The tabs whose session holds its tensors, least recently used first (of ``address`` only)."""
        with self.lock:
            tabs = list(self.tabs.values())
        tabs = [st for st in tabs if st.session is not None and (address is None or st.life.address == address)]
        return sorted(tabs, key=lambda st: st.life.last_used)

    def sweep(self) -> None:
        """Release the sessions idle past the idle time; then keep the budget (the sweeper's round)."""
        now = self.clock()
        with self.lock:
            tabs = list(self.tabs.values())
        for st in tabs:
            if now - st.life.last_used >= self.idle_s:
                self.end(st)
        self.keep_limits()

    @contextlib.contextmanager
    def idle(self, st: ExplorerState) -> Iterator[bool]:
        """Whether ``st`` is idle, holding its lock meanwhile if so; never waits for the lock."""
        if st.life.events or st.generating or not st.lock.acquire(blocking=False):
            yield False
            return
        try:
            yield st.life.events == 0 and not st.generating
        finally:
            st.lock.release()

    def put_aside(self, st: ExplorerState) -> bool:
        """Let an idle session's tensors go and keep its tokens; False when its tab is busy."""
        with self.idle(st) as idle:
            if not idle or st.session is None:
                return False
            n = len(st.session.token_ids)
            st.life.put_aside = snapshot_of(st.model_name, st.session)
            st.release()
            self.put_aside_count += 1
        log.info("put aside an idle session of %d tokens (the sessions' memory budget or the cap per address)", n)
        return True

    def end(self, st: ExplorerState) -> bool:
        """Release an idle session after its idle time: tensors, tokens and what it kept."""
        with self.idle(st) as idle:
            if not idle:
                return False
            had = st.session is not None or st.life.put_aside is not None
            st.release()
            st.left.clear()
            st.patching = None
            st.life.put_aside, st.life.ended = None, had
            key = st.life.key
            with self.lock:
                self.tabs.pop(key, None)
            self.ended_count += 1
        for hook in self.on_end:
            hook(key)
        if had:
            log.info("released a session unused for %s", minutes_said(self.idle_s))
        return True

    def ended_note(self) -> str:
        return ENDED.format(minutes=minutes_said(self.idle_s))


class SessionSweeper(threading.Thread):
    """A daemon thread that runs ``keeper.sweep()`` every ``every_s`` seconds; ``stop()`` ends it."""

    def __init__(self, keeper: SessionKeeper, every_s: float | None = None) -> None:
        super().__init__(name="session-sweeper", daemon=True)
        self.keeper = keeper
        self.every_s = every_s if every_s is not None else min(SWEEP_EVERY_S, max(1.0, keeper.idle_s / 4))
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.every_s):
            try:
                self.keeper.sweep()
            except Exception:  # a bug here must not end the sweeping: logged, and the next round runs
                log.exception("the session sweeper failed")

    def stop(self) -> None:
        self._stopped.set()


KEEPER = SessionKeeper()  # this process's (each replica keeps its own)
_sweeper: SessionSweeper | None = None


def sweep_sessions() -> None:
    """Start the server's sweeper once per process, however many apps it starts."""
    global _sweeper
    if _sweeper is None or not _sweeper.is_alive():
        _sweeper = SessionSweeper(KEEPER)
        _sweeper.start()
