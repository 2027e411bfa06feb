"""How a page in a workshop learns that something changed: a long poll.

The page asks ``GET /workshop/wait?code=K7PQ2M&role=student&seen=<key>``. When the workshop's
state, as that role sees it, differs from ``seen``, the answer comes at once; otherwise the request
waits, up to 25 s, until it does. The page then presses its panel's hidden Sync button: one Gradio
event per change, and nothing at all while nothing changes.

One ``Watcher`` per process reads each watched workshop's pulse from the database every 200 ms (one
small read per workshop, however many pages wait on it) and wakes the requests whose key changed.
The database is the truth: another process (a replica) may have made the change.
The answers carry nothing secret: counts, versions, no answer and no name.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

from fastapi.responses import JSONResponse

if TYPE_CHECKING:
    from explorer.workshop import Pulse, Workshops

EVERY_S = 0.2  # how often a watched workshop is read
WAIT_S = 25.0  # the longest a request waits (below the 60 s most proxies allow an idle request)
MAX_WAITING = 2000  # requests waiting in this process at once; beyond, a page is told to ask again


def key(pulse: Pulse, role: str) -> str:
    """What a page of ``role`` must react to: a student, the view and the question; a teacher,
    also every answer and join (a changed answer changes no count: the time of the newest does)."""
    common = f"v{pulse.version}-q{pulse.asked}-r{pulse.round}"
    return f"{common}-a{pulse.answered}-t{pulse.last_answer}-s{pulse.students}" if role == "teacher" else common


class Watcher:
    def __init__(self, workshops: Workshops):
        self.workshops = workshops
        self.waiting: dict[str, list[tuple[asyncio.Future, str, str]]] = {}  # code -> (future, role, seen)
        self.task: asyncio.Task | None = None

    async def wait(self, code: str, role: str, seen: str) -> JSONResponse:
        pulse = self.workshops.pulse(code)  # a read that never waits for a writer (Workshops._reading)
        if pulse is None:
            return answer(None, role)
        if key(pulse, role) != seen or sum(map(len, self.waiting.values())) >= MAX_WAITING:
            return answer(pulse, role)
        future = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(pulse_code(code), []).append((future, role, seen))
        self.start()
        try:
            return answer(await asyncio.wait_for(future, WAIT_S), role)
        except TimeoutError:
            return answer(pulse, role)
        finally:
            self.forget(pulse_code(code), future)

    def start(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.watch())

    async def watch(self) -> None:
        """Read every watched workshop every 200 ms; wake the waiters whose key changed. Ends when
        nobody waits (the next request starts it again)."""
        while self.waiting:
            started = time.perf_counter()
            for code in list(self.waiting):
                pulse = self.workshops.pulse(code)
                for future, role, seen in list(self.waiting.get(code, ())):
                    if not future.done() and (pulse is None or key(pulse, role) != seen):
                        future.set_result(pulse)
            await asyncio.sleep(max(0.0, EVERY_S - (time.perf_counter() - started)))

    def forget(self, code: str, future: asyncio.Future) -> None:
        left = [w for w in self.waiting.get(code, ()) if w[0] is not future]
        if left:
            self.waiting[code] = left
        else:
            self.waiting.pop(code, None)


def pulse_code(code: str) -> str:
    from explorer.workshop import room_code

    return room_code(code)


def answer(pulse: Pulse | None, role: str) -> JSONResponse:
    headers = {"Cache-Control": "no-store"}
    if pulse is None:
        return JSONResponse({"gone": True}, status_code=404, headers=headers)
    return JSONResponse({**asdict(pulse), "key": key(pulse, role)}, headers=headers)
