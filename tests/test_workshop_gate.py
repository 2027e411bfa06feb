"""What a request that names a room code learns (issue 40, items 3 and 8): without a seat, one
answer for every code (never existed, ended, expired, seat removed, wrong token or secret, live);
a page that waits when its seat goes hears it; misses are counted per address, then "wait a
minute". On a FastAPI app with the workshop's three routes and a SQLite database; the app itself,
over HTTP: tests/browser/test_workshop_secrets.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import subprocess

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.testclient import TestClient

from explorer.ui import workshop_gate, workshop_round, workshop_watch
from explorer.workshop import Limits, Workshops, connect, database


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def ws(tmp_path, clock):
    engine = connect(f"sqlite:///{tmp_path / 'workshops.sqlite3'}")
    yield Workshops(engine, Limits(), clock=clock)
    engine.dispose()


@pytest.fixture(autouse=True)
def misses(monkeypatch):
    """This test's own count of misses (the app's is one per process)."""
    counted = workshop_gate.Misses(limit=1000)
    monkeypatch.setattr(workshop_gate, "MISSES", counted)
    return counted


def app_of(ws: Workshops) -> FastAPI:
    app = FastAPI()
    workshop_watch.add_routes(app, lambda: ws)
    workshop_round.add_routes(app, lambda: ws)
    return app


@pytest.fixture
def client(ws):
    return TestClient(app_of(ws))


def remove_seat(ws: Workshops, student: int) -> None:
    """A seat removed (the teacher's Remove, issue 40 item 9): its row is gone."""
    with ws.engine.begin() as db:
        db.execute(sa.delete(database.students).where(database.students.c.id == student))


def no_seat_answers(client, code: str, token: str | None = None, secret: str | None = None) -> list[tuple]:
    """What each of the three requests answers for this code and seat: (status, body bytes)."""
    seat = {"code": code} | ({"token": token} if token is not None else {}) | ({"secret": secret} if secret else {})
    asked = [("/workshop/wait", seat | {"seen": ""}), ("/workshop/round", seat),
             ("/workshop/answer", seat | {"round": 1, "choice": "x"})]  # fmt: skip
    return [(r.status_code, r.content) for r in (client.post(path, json=body) for path, body in asked)]


def test_without_a_seat_every_code_answers_alike(ws, client, clock):
    live = ws.start(3)
    ada, bo = ws.join(live.code, "Ada", "10.0.0.1"), ws.join(live.code, "Bo", "10.0.0.2")
    ended = ws.start(3)
    ended_seat = ws.join(ended.code, "", "10.0.0.3")
    ws.end(ended.code, ended.secret)
    remove_seat(ws, bo.student)
    expected = [(404, workshop_gate.no_seat().body)] * 3
    for code, token, secret in [
        ("ZZZZZZ", "a-token", None),  # a code that never existed
        ("not a code!", "a-token", None),
        (live.code, None, None),  # live, no seat named
        (live.code, "not-a-seat", None),
        (live.code, None, "forged-secret"),
        (live.code, bo.token, None),  # a seat removed
        (ended.code, ended_seat.token, None),  # a workshop ended
        (ended.code, None, ended.secret),
    ]:
        assert no_seat_answers(client, code, token, secret) == expected, (code, token, secret)
    # A seat is what tells a live workshop: Ada's page gets its pulse and its question.
    assert client.post("/workshop/wait", json={"code": live.code, "token": ada.token, "seen": ""}).json()["key"]
    assert client.post("/workshop/round", json={"code": live.code, "token": ada.token}).status_code == 200
    assert client.post("/workshop/wait", json={"code": live.code, "secret": live.secret}).status_code == 200
    clock.now += 25 * 3600  # expired: Ada's seat is gone too, and says so the same way
    assert no_seat_answers(client, live.code, ada.token) == expected
    assert no_seat_answers(client, live.code, None, live.secret) == expected
    assert workshop_gate.NO_SEAT in workshop_gate.no_seat().body.decode()


def test_the_seat_travels_in_the_body_never_in_the_address(client, ws):
    live = ws.start(3)
    ada = ws.join(live.code, "Ada", "10.0.0.1")
    assert client.get("/workshop/wait", params={"code": live.code, "token": ada.token}).status_code == 405
    assert client.post("/workshop/wait", content=b"[1]").status_code == 400
    assert client.post("/workshop/wait", content=b"x" * 5000).status_code == 413


def test_misses_are_counted_per_address_then_wait_a_minute(ws, monkeypatch):
    counted = workshop_gate.Misses(limit=3)
    monkeypatch.setattr(workshop_gate, "MISSES", counted)
    live = ws.start(3)
    ada = ws.join(live.code, "Ada", "10.0.0.1")
    stranger = TestClient(app_of(ws), client=("10.0.0.66", 5000))
    neighbour = TestClient(app_of(ws), client=("10.0.0.7", 5000))
    said = [stranger.post("/workshop/wait", json={"code": f"ZZZZZ{c}", "token": "x"}) for c in "ABCD"]
    assert [r.status_code for r in said] == [404, 404, 404, 429]
    assert "wait a minute" in said[-1].json()["error"]
    # Throttled, the address learns nothing more, even with a seat (nothing is read for it)...
    assert stranger.post("/workshop/round", json={"code": live.code, "token": ada.token}).status_code == 429
    # ...and nobody else is slowed.
    assert neighbour.post("/workshop/round", json={"code": live.code, "token": ada.token}).status_code == 200


def test_the_count_of_misses_forgets_after_a_minute_and_stays_bounded(monkeypatch):
    clock = Clock()
    counted = workshop_gate.Misses(limit=2, clock=clock)
    counted.miss("a")
    counted.miss("a")
    with pytest.raises(workshop_gate.TooManyMisses):
        counted.check("a")
    counted.check("b")
    clock.now += workshop_gate.WINDOW_S + 1
    counted.check("a")
    monkeypatch.setattr(workshop_gate, "REMEMBERED", 10)
    for i in range(50):
        counted.miss(f"10.0.{i}.1")
    assert len(counted.seen) <= 10


def wait_for(app: FastAPI, body: dict, timeout: float = 20.0):
    """A page's long poll, answered by ``app`` in this event loop (the watcher runs beside it)."""
    transport = httpx.ASGITransport(app=app)

    async def asked():
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return await http.post("/workshop/wait", json=body, timeout=timeout)

    return asked()


def test_a_waiting_page_hears_that_its_seat_is_gone(ws):
    """The teacher ends the workshop, or removes a seat: the pages that wait hear it within the
    watcher's tick, in the same answer as for a code that never existed (no miss counted)."""
    app = app_of(ws)
    live = ws.start(3)
    ada, bo = ws.join(live.code, "Ada", "10.0.0.1"), ws.join(live.code, "Bo", "10.0.0.2")
    current = TestClient(app).post("/workshop/wait", json={"code": live.code, "token": ada.token}).json()["key"]

    async def scenario():
        waiting = [
            asyncio.ensure_future(wait_for(app, {"code": live.code, "token": seat.token, "seen": current}))
            for seat in (ada, bo)
        ]
        await asyncio.sleep(0.5)
        assert not any(w.done() for w in waiting)  # nothing changed: they wait
        remove_seat(ws, bo.student)
        removed = await asyncio.wait_for(waiting[1], 15)
        assert not waiting[0].done()  # Ada's seat is there: she waits on
        ws.end(live.code, live.secret)
        return removed, await asyncio.wait_for(waiting[0], 15)

    # In a thread of its own: in the whole suite, the browser tests' Playwright runs an event loop here.
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        removed, ended = thread.submit(asyncio.run, scenario()).result()
    for answer in (removed, ended):
        assert (answer.status_code, answer.content) == (404, workshop_gate.no_seat().body)
    assert not workshop_gate.MISSES.seen  # a page told by the watcher made no miss


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (Debian: apt-get install nodejs)")
def test_the_page_scripts_parse_with_the_teacher_link_part_filled_in(tmp_path):
    """The teacher link's part is put into page.js and into the load event's script as text: both
    must still be JavaScript (a placeholder left in a comment once broke the whole page script)."""
    from explorer.ui.layout import PAGE_SCRIPT
    from explorer.ui.panels.workshop.wiring import TEACHER_LINK_SCRIPT

    for name, script in (("page", PAGE_SCRIPT), ("teacher_link", TEACHER_LINK_SCRIPT)):
        assert "__TEACHER_LINK__" not in script
        path = tmp_path / f"{name}.js"
        path.write_text(f"const run = {script};\n")
        checked = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr


def test_waits_are_limited_per_address_and_a_full_list_answers_busy_with_a_pause(ws, monkeypatch):
    """One address holds at most WAITS_PER_ADDRESS waits, the process MAX_WAITING; past either the
    answer is "busy, try again in N s" (429 or 503, retry_s and Retry-After), not the pulse at once
    (which a page would take as an answer and ask again without a pause)."""
    monkeypatch.setattr(workshop_watch, "WAITS_PER_ADDRESS", 2)
    monkeypatch.setattr(workshop_watch, "MAX_WAITING", 3)
    app = app_of(ws)
    live = ws.start(3)
    seat = ws.join(live.code, "Ada", "10.0.0.1")
    current = TestClient(app).post("/workshop/wait", json={"code": live.code, "token": seat.token}).json()["key"]
    asked = {"code": live.code, "token": seat.token, "seen": current}

    async def from_address(address: str):
        transport = httpx.ASGITransport(app=app, client=(address, 1234))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.post("/workshop/wait", json=asked)

    async def scenario():
        waiting = [asyncio.ensure_future(from_address("10.0.0.1")) for _ in range(2)]
        await asyncio.sleep(0.3)
        third_of_one = await asyncio.wait_for(from_address("10.0.0.1"), 5)  # the address's limit
        waiting.append(asyncio.ensure_future(from_address("10.0.0.2")))
        await asyncio.sleep(0.3)
        past_the_process = await asyncio.wait_for(from_address("10.0.0.3"), 5)  # the process's limit
        assert not any(w.done() for w in waiting)  # those admitted wait on
        for w in waiting:
            w.cancel()
        return third_of_one, past_the_process

    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        address_full, process_full = thread.submit(asyncio.run, scenario()).result()
    for answer, status, retry_s in ((address_full, 429, workshop_watch.ADDRESS_RETRY_S),
                                    (process_full, 503, workshop_watch.BUSY_RETRY_S)):  # fmt: skip
        body = answer.json()
        assert answer.status_code == status and body["busy"] and body["retry_s"] == retry_s
        assert answer.headers["retry-after"] == str(retry_s) and f"try again in {retry_s} s" in body["error"]
