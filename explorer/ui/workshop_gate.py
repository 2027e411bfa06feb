"""What a request that names a room code learns, and how often it may ask (issue 40, item 8).

A room code is six characters: guessed fast enough, a stranger finds a live workshop. So:

- every request or event that takes a code answers a caller **without a seat** (no valid
  student token, no teacher secret) in one way, ``NO_SEAT``, whether the code never existed, the
  workshop ended or expired, or it is live: only a seat tells a live workshop from a dead one. A
  page whose seat is gone (ended, removed, expired) gets the same answer, and says so;
- each such answer is a *miss*, counted per address: after ``DECODER_EXPLORER_CODE_MISSES_PER_MINUTE``
  (default 30) in a minute, every request from that address that names a code is answered
  "wait a minute" (HTTP 429) without reading the database, until the minute is over. Nobody else is
  slowed. A page whose workshop ends while it waits is told by the watcher: no miss.

The counts are per process (each replica counts its own).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque

from fastapi.responses import JSONResponse

log = logging.getLogger("decoder_explorer")

MISSES_ENV = "DECODER_EXPLORER_CODE_MISSES_PER_MINUTE"
MISSES_PER_MINUTE = 30
WINDOW_S = 60.0
REMEMBERED = 10_000  # addresses; beyond, the least recently missed half is forgotten

NO_SEAT = (
    "This page has no place in that workshop: it has ended, your place in it was removed, or the code "
    "or link is wrong. Everything on your page stays yours: keep exploring on your own, or join another "
    "workshop with its room code."
)
WAIT = "Too many room codes that lead nowhere came from your network: wait a minute, then try again."
NO_STORE = {"Cache-Control": "no-store"}


class TooManyMisses(Exception):
    """The address missed too often this minute: answer ``WAIT`` (HTTP 429)."""

    def __init__(self):
        super().__init__(WAIT)


def misses_per_minute() -> int:
    try:
        return max(1, int(os.environ.get(MISSES_ENV) or MISSES_PER_MINUTE))
    except ValueError:
        return MISSES_PER_MINUTE


class Misses:
    """Per address, the times of its misses in the last minute (at most ``limit`` kept each)."""

    def __init__(self, limit: int | None = None, clock=time.monotonic):
        self.limit = limit or misses_per_minute()
        self.clock = clock
        self.seen: dict[str, deque[float]] = {}
        self.lock = threading.Lock()

    def check(self, address: str) -> None:
        """Raise ``TooManyMisses`` while ``address`` is over its misses this minute."""
        with self.lock:
            times = self._recent(address)
            if times is not None and len(times) >= self.limit:
                raise TooManyMisses()

    def miss(self, address: str) -> None:
        with self.lock:
            times = self._recent(address)
            if times is None:
                if len(self.seen) >= REMEMBERED:
                    self._forget_half()
                times = self.seen[address] = deque(maxlen=self.limit)
            times.append(self.clock())
            if len(times) == self.limit:  # one line for the operator, when the address crosses the line
                log.info("workshops: %s missed %d room codes in a minute: refused for a minute", address, self.limit)

    def _recent(self, address: str) -> deque[float] | None:
        times = self.seen.get(address)
        if times is None:
            return None
        while times and times[0] <= self.clock() - WINDOW_S:
            times.popleft()
        if not times:
            del self.seen[address]
            return None
        return times

    def _forget_half(self) -> None:
        oldest = sorted(self.seen, key=lambda a: self.seen[a][-1] if self.seen[a] else 0.0)
        for address in oldest[: len(oldest) // 2]:
            del self.seen[address]


MISSES = Misses()  # this process's, shared by the poll, the question and answer requests and the events


def no_seat() -> JSONResponse:
    """The one answer to a caller without a seat: the same bytes for every code."""
    return JSONResponse({"gone": True, "error": NO_SEAT}, status_code=404, headers=NO_STORE)


def wait_a_minute() -> JSONResponse:
    return JSONResponse({"error": WAIT, "retry_s": int(WINDOW_S)}, status_code=429, headers=NO_STORE)


def address_of(request) -> str:
    """The caller's address as the server believes it (X-Forwarded-For only from the configured
    balancer: explorer.ui.trusted_proxy)."""
    client = getattr(request, "client", None)
    return str(getattr(client, "host", None) or "unknown")[:64]
