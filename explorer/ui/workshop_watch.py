"""How a page in a workshop learns that something changed: a long poll.

The page sends ``POST /workshop/wait`` with ``{"code": "K7PQ2M", "seen": "<key>"}`` and its seat:
``"token"`` (a student's) or ``"secret"`` (the teacher's), in the body, never in the address. When
the workshop's state, as that seat sees it, differs from ``seen``, the answer comes at once;
otherwise the request waits, up to 25 s, until it does. The page then presses its panel's hidden
Sync button: one Gradio event per change, and nothing at all while nothing changes.

A request without a seat in that workshop (an unknown code, a workshop that ended or expired, a
removed seat, a wrong token or secret) gets one answer, ``workshop_gate.no_seat()``: HTTP 404
``{"gone": true, "error": ...}``, the same for a code that never existed. A page that waits when
its seat goes (the teacher ends the workshop, it expires, the seat is removed) gets the same answer
within a watcher's tick: that is how its page learns that the workshop ended for it. Requests that
find no seat are counted per address (``workshop_gate.Misses``): past the limit, 429 for a minute.

Waiting costs the server little, but not nothing: one address holds at most ``WAITS_PER_ADDRESS``
waits (``DECODER_EXPLORER_WAITS_PER_ADDRESS``: a class behind one school router fits), the process
at most ``MAX_WAITING``. Past either, the answer is "busy, try again in N s": 429 for the address,
503 for the process, ``{"busy": true, "error": ..., "retry_s": N}`` and a ``Retry-After`` header;
the page's script waits those N s (and a little more) before it asks again
(``static/workshop_wait.js``), instead of asking again at once.

One ``Watcher`` per process reads each watched workshop's pulse from the database every 200 ms (one
small read per workshop, however many pages wait on it) and wakes the requests whose key changed.
The database is the truth: another process (a replica) may have made the change.
The answers carry nothing secret: counts, versions, no answer and no name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from explorer.admission import setting
from explorer.ui import workshop_gate
from explorer.ui.gradio_private import serve_ahead_of_gradio
from explorer.ui.workshop_gate import TooManyMisses
from explorer.workshop import WorkshopError

if TYPE_CHECKING:
    from explorer.workshop import Pulse, Workshops

EVERY_S = 0.2  # how often a watched workshop is read
WAIT_S = 25.0  # the longest a request waits (below the 60 s most proxies allow an idle request)
MAX_WAITING = 2000  # requests waiting in this process at once; beyond, a page is told to ask again later
WAITS_PER_ADDRESS = setting("DECODER_EXPLORER_WAITS_PER_ADDRESS", 64, 1, MAX_WAITING)  # a class behind one router
BUSY_RETRY_S = 10  # a process with MAX_WAITING waits: a page asks again after this long
ADDRESS_RETRY_S = int(WAIT_S)  # an address with all its waits: one of them has answered by then

Seated = Callable[[], bool]  # whether a waiting student's seat is still there


def key(pulse: Pulse, role: str) -> str:
    """What a page of ``role`` must react to: a student, the view and the question; a teacher,
    also every answer and join (a changed answer changes no count: the time of the newest does)."""
    common = f"v{pulse.version}-q{pulse.asked}-r{pulse.round}"
    return f"{common}-a{pulse.answered}-t{pulse.last_answer}-s{pulse.students}" if role == "teacher" else common


class Watcher:
    def __init__(self, workshops: Workshops):
        self.workshops = workshops
        # code -> (future, role, seen, whether the seat is still there: None for the teacher's)
        self.waiting: dict[str, list[tuple[asyncio.Future, str, str, Seated | None]]] = {}
        self.students: dict[str, int] = {}  # code -> its count of students at the last read
        self.by_address: dict[str, int] = {}  # address -> how many of its requests wait
        self.task: asyncio.Task | None = None

    @property
    def n_waiting(self) -> int:
        return sum(self.by_address.values())

    async def wait(
        self, code: str, role: str, seen: str, seated: Seated | None = None, address: str = "unknown"
    ) -> JSONResponse:
        """``code``'s pulse for a page whose seat was checked (``seated`` checks it again); "busy"
        when the address or the process holds all the waits it may."""
        pulse = self.workshops.pulse(code)  # a read that never waits for a writer (Workshops._reading)
        if pulse is None:
            return answer(None, role)
        if key(pulse, role) != seen:
            return answer(pulse, role)
        if self.by_address.get(address, 0) >= WAITS_PER_ADDRESS:
            return busy(429, ADDRESS_RETRY_S, f"This address already holds {WAITS_PER_ADDRESS} waiting pages")
        if self.n_waiting >= MAX_WAITING:
            return busy(503, BUSY_RETRY_S, "The server is busy")
        future = asyncio.get_running_loop().create_future()
        code = pulse_code(code)
        self.students.setdefault(code, pulse.students)
        self.waiting.setdefault(code, []).append((future, role, seen, seated))
        self.by_address[address] = self.by_address.get(address, 0) + 1
        self.start()
        try:
            return answer(await asyncio.wait_for(future, WAIT_S), role)
        except TimeoutError:
            return answer(pulse, role)
        finally:
            self.forget(code, future)
            self.by_address[address] -= 1
            if not self.by_address[address]:
                del self.by_address[address]

    def start(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.watch())

    async def watch(self) -> None:
        """Read every watched workshop every 200 ms; wake the waiters whose key changed, and those
        whose seat went (the workshop ended or expired: no pulse; a seat removed: checked when the
        count of students fell). Ends when nobody waits (the next request starts it again)."""
        while self.waiting:
            started = time.perf_counter()
            for code in list(self.waiting):
                pulse = self.workshops.pulse(code)
                # A seat removed lowers the count: only then are the waiting students' seats read
                # again (a join, thirty at the start of a class, costs no read per waiting page).
                recheck = pulse is not None and pulse.students < self.students.get(code, pulse.students)
                if pulse is not None:
                    self.students[code] = pulse.students
                for future, role, seen, seated in list(self.waiting.get(code, ())):
                    if future.done():
                        continue
                    if pulse is None or (recheck and seated is not None and not seated()):
                        future.set_result(None)
                    elif key(pulse, role) != seen:
                        future.set_result(pulse)
            await asyncio.sleep(max(0.0, EVERY_S - (time.perf_counter() - started)))

    def forget(self, code: str, future: asyncio.Future) -> None:
        left = [w for w in self.waiting.get(code, ()) if w[0] is not future]
        if left:
            self.waiting[code] = left
        else:
            self.waiting.pop(code, None)
            self.students.pop(code, None)


def pulse_code(code: str) -> str:
    from explorer.workshop import room_code

    return room_code(code)


def busy(status: int, retry_s: int, why: str) -> JSONResponse:
    """ "Busy, try again in ``retry_s`` s": the page's script waits that long before it asks again."""
    return JSONResponse(
        {"busy": True, "error": f"{why}: try again in {retry_s} s.", "retry_s": retry_s}, status_code=status,
        headers={**workshop_gate.NO_STORE, "Retry-After": str(retry_s)},
    )  # fmt: skip


def answer(pulse: Pulse | None, role: str) -> JSONResponse:
    if pulse is None:
        return workshop_gate.no_seat()
    return JSONResponse({**asdict(pulse), "key": key(pulse, role)}, headers=workshop_gate.NO_STORE)


# ---------------------------------------------------------------- who may wait
def seat_of(workshops: Workshops, asked: dict) -> tuple[str, Seated | None] | None:
    """The role of the seat the request names (``"student"`` with a check that it is still there,
    or ``"teacher"``), or None when it names none: no token or secret, or a wrong one, or no such
    live workshop. Which of those is never told."""
    code, token, secret = asked.get("code"), asked.get("token"), asked.get("secret")
    try:
        if isinstance(token, str):
            workshops.seat(code, token)
            return "student", lambda: still_seated(workshops, code, token)
        if isinstance(secret, str):
            workshops.check_teacher(code, secret)
            return "teacher", None
    except WorkshopError:
        return None
    return None


def still_seated(workshops: Workshops, code, token) -> bool:
    try:
        workshops.seat(code, token)
    except WorkshopError:
        return False
    return True


def add_routes(app, store: Callable[[], Workshops]) -> None:
    """``POST /workshop/wait``, ahead of Gradio's own routes. Answered on the event loop (the seat
    is checked on a worker thread): no worker thread waits."""
    from explorer.ui.workshop_round import Refused, read_body, refused

    watcher: list[Watcher] = []

    async def wait_route(request: Request) -> JSONResponse:
        address = workshop_gate.address_of(request)
        try:
            workshop_gate.MISSES.check(address)
            asked = await read_body(request)
            seat = await run_in_threadpool(seat_of, store(), asked)
        except TooManyMisses:
            return workshop_gate.wait_a_minute()
        except Refused as error:
            return refused(error)
        if seat is None:
            workshop_gate.MISSES.miss(address)
            return workshop_gate.no_seat()
        if not watcher:
            watcher.append(Watcher(store()))
        seen = asked.get("seen")
        role, seated = seat
        seen = seen[:200] if isinstance(seen, str) else ""
        return await watcher[0].wait(asked["code"], role, seen, seated, address)

    serve_ahead_of_gradio(app, "/workshop/wait", wait_route, ["POST"])
