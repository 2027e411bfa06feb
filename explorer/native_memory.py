"""The C library's memory: fewer arenas, and free memory handed back to the system.

PyTorch allocates a tensor's storage with malloc. glibc keeps freed blocks for reuse and hands
back to the system only what is free at the top of its heap, so a server whose users' steps
allocate and free tensors of ever-changing sizes (every session's length differs) grows far past
what it uses: with 30 SmolLM2 sessions of ~200 tokens (~2 GB in use with the models) the server
peaked at ~3.2 GB, and at 2.26 GB when it hands free memory back once a second
(bench/bench_load.py --memory-only). Everything here is a no-op where the C library is not glibc.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import sys
import threading
import time

MALLOC_ARENAS = 2
M_ARENA_MAX = -8
TRIM_EVERY_S = 1.0
TRIM_ENV = "DECODER_EXPLORER_RETURN_MEMORY_S"  # seconds between two returns; 0: never (bench/bench_load.py)

log = logging.getLogger("decoder_explorer")


@functools.cache
def glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (which has malloc_trim and mallopt), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 (glibc has both; musl has no malloc_trim)
    except (OSError, AttributeError):
        return None
    return libc


def fewer_malloc_arenas() -> None:
    """Let glibc keep at most two memory arenas, before the server starts its threads.

    Every thread that allocates gets an arena of its own by default (up to 8 per core), and with
    a class stepping at once (dozens of event threads) their free space stays in the process:
    30 sessions of 200 tokens peaked 500 MB higher. Not when $MALLOC_ARENA_MAX is set."""
    libc = glibc()
    if libc is not None and not os.environ.get("MALLOC_ARENA_MAX"):
        libc.mallopt(M_ARENA_MAX, MALLOC_ARENAS)


def return_free_memory() -> float:
    """Hand the free memory inside glibc's heaps back to the system (``malloc_trim(0)``, which
    releases free pages anywhere in a heap, not only at its top); returns how long it took, ms."""
    libc = glibc()
    started = time.perf_counter()
    if libc is not None:
        libc.malloc_trim(0)
    return (time.perf_counter() - started) * 1000


_hot = 0  # how many steps run now (explorer/batching.py); a trim waits for none
_hot_lock = threading.Lock()


@contextlib.contextmanager
def hot_path():
    """Work that a trim must not stall (a batched step): no trim starts while any runs.

    glibc's malloc_trim walks every arena holding its lock, so a step allocating meanwhile waits
    for it (0.4-0.7 s at 6-11 GB, issue 58)."""
    global _hot
    with _hot_lock:
        _hot += 1
    try:
        yield
    finally:
        with _hot_lock:
            _hot -= 1


def on_hot_path() -> bool:
    """Whether a step runs now."""
    return _hot > 0


class FreeMemoryReturner(threading.Thread):
    """A daemon thread that returns free memory every ``every_s`` seconds (the server's: ~10 ms
    at 2 GB, and what it hands back is faulted in again when reused; bench_load's runs with and
    without it differ by less than their noise). ``stop()`` ends it."""

    def __init__(self, every_s: float = TRIM_EVERY_S) -> None:
        super().__init__(name="return-free-memory", daemon=True)
        self.every_s, self.returns, self.skipped = every_s, 0, 0
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.every_s):
            if on_hot_path():  # a step runs: trim at the next quiet moment, never during it
                self.skipped += 1
                continue
            took = return_free_memory()
            self.returns += 1
            if took > 50:
                log.info("returning free memory took %.0f ms", took)

    def stop(self) -> None:
        self._stopped.set()


def keep_returning_free_memory(every_s: float | None = None) -> FreeMemoryReturner | None:
    """Start a FreeMemoryReturner (every ``every_s`` s, else ``$DECODER_EXPLORER_RETURN_MEMORY_S``,
    else every TRIM_EVERY_S); None where the C library is not glibc, or when told 0."""
    every_s = every_s if every_s is not None else float(os.environ.get(TRIM_ENV) or TRIM_EVERY_S)
    if glibc() is None or every_s <= 0:
        return None
    returner = FreeMemoryReturner(every_s)
    returner.start()
    return returner


_server_returner: FreeMemoryReturner | None = None


def serve_memory_back() -> None:
    """The server's FreeMemoryReturner: started once per process, however many apps it starts."""
    global _server_returner
    if _server_returner is None or not _server_returner.is_alive():
        _server_returner = keep_returning_free_memory()
