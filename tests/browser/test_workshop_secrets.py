"""A workshop's seats and secrets on the running app (issue 40, items 3, 8, 10, 15).

- Item 3: students are told that the workshop ended (or that their seat was removed) within a
  watcher's tick: the panel says so and what they can do, Send is off, the page stops following
  and asking, and their own work stays. One student on a phone.
- Item 10: the teacher link's secret never travels in a request (URL or Referer) and leaves the
  address bar; a student's token neither.
- Item 8: crafted requests: without a seat every code answers alike; misses are throttled per
  address. Item 15: X-Forwarded-For from a client that is not the balancer is not believed (the
  throttle counts the real address); /health names no process id.

The app is this module's own, on a database file in a temporary folder that the tests also
open (to remove a seat as the teacher's Remove does, and to make workshops without a page).
The browser tests run first: the crafted ones then use up this address's misses."""

from __future__ import annotations

import json
import urllib.request

import httpx
import pytest
import sqlalchemy as sa

from explorer.ui import workshop_gate
from explorer.workshop import Limits, Workshops, connect, database
from tests.browser.conftest import ARTIFACTS, running_app
from tests.browser.helpers import shot, tokens
from tests.browser.test_lessons_ui import open_lesson, wait_step
from tests.browser.test_workshop_ui import open_workshop_panel, wait_page, wait_text

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = 3
MISSES = 40  # this app's misses a minute per address


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """(URL, process, database URL) of this module's app."""
    db_url = f"sqlite:///{tmp_path_factory.mktemp('secrets') / 'workshops.sqlite3'}"
    log = ARTIFACTS / "app-workshop-secrets.log"
    log.unlink(missing_ok=True)
    env = {"DECODER_EXPLORER_DATABASE_URL": db_url, workshop_gate.MISSES_ENV: str(MISSES)}
    with running_app(log, **env) as (url, process):
        yield url, process, db_url


@pytest.fixture(scope="module")
def ws(app):
    engine = connect(app[2])
    yield Workshops(engine, Limits())
    engine.dispose()


def open_context(browser, url: str, phone: bool = False):
    size = {"width": 390, "height": 844} if phone else {"width": 1280, "height": 900}
    context = browser.new_context(viewport=size, is_mobile=phone, has_touch=phone)
    page = context.new_page()
    page.set_default_timeout(120_000)
    sent = []  # (url, referer) of every request the page made
    page.on("request", lambda r: sent.append((r.url, r.headers.get("referer", ""))))
    page.goto(url)
    wait_page(page)
    return page, sent


def start_workshop(browser, url: str):
    teacher, _ = open_context(browser, url)
    open_lesson(teacher, LESSON)
    wait_step(teacher, LESSON, 0)
    open_workshop_panel(teacher)
    teacher.click("#workshop-start")
    wait_text(teacher, "#workshop-info", "Workshop ")
    box = "#workshop-student-link textarea, #workshop-student-link input"
    teacher.wait_for_function("s => document.querySelector(s)?.value.startsWith('http')", arg=box)  # made whole
    link = teacher.locator(box).input_value()
    return teacher, link, link.rsplit("=", 1)[1]


def join(browser, link: str, name: str, phone: bool = False):
    page, sent = open_context(browser, link, phone)
    open_workshop_panel(page)
    page.fill("#workshop-name input, #workshop-name textarea", name)
    page.click("#workshop-join")
    wait_text(page, "#workshop-info", "You are in workshop")
    return page, sent


def live_seat(page) -> dict:
    value = page.locator("#workshop-live textarea, #workshop-live input").input_value()
    return json.loads(value) if value else {}


def remove_seat(ws: Workshops, token: str) -> None:
    """The seat removed as the teacher's Remove does (issue 40, item 9): its row is gone."""
    from explorer.workshop.service import digest

    with ws.engine.begin() as db:
        db.execute(sa.delete(database.students).where(database.students.c.token_hash == digest(token)))


def told_it_ended(page, code: str, removed: bool = False) -> None:
    """The page says what ended its part: the workshop, or (``removed``) its seat in a workshop
    that runs on, in words that do not hedge between the two."""
    told = f"Your teacher removed your place in workshop {code}." if removed else f"Workshop {code} has ended."
    wait_text(page, "#workshop-info", told)
    said = page.inner_text("#workshop-info")
    assert "(or your teacher removed" not in said and ("has ended" in said) != removed
    assert "keep exploring on your own" in said and "join another workshop" in said
    send = page.locator("#workshop-send")
    assert not send.is_visible() or send.is_disabled()  # nothing more can be sent
    assert live_seat(page) == {}  # the page's script has no seat left to ask for, or follow with
    assert page.locator("#workshop-join").is_visible()  # joining another is one step away
    assert page.locator("#workshop-code input, #workshop-code textarea").input_value() == ""
    # The sentence on the screen as it is (not below it), and nothing left that says the teacher leads.
    page.wait_for_function(IN_VIEW, arg="#workshop-info p")
    assert "teacher leads" not in page.inner_text("#lesson-text")
    assert "Workshop panel" not in page.inner_text("#lesson-text")
    assert page.locator("#step").is_visible()  # the whole explorer back: no student's page left


# Whether an element is shown and wholly inside the window as it is scrolled now.
IN_VIEW = """s => { const el = document.querySelector(s); if (!el) return false;
    const r = el.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; }"""


def test_students_are_told_that_the_workshop_ended_and_keep_their_work(browser, app, ws):
    url = app[0]
    teacher, link, code = start_workshop(browser, url)
    ada, ada_sent = join(browser, link, "Ada", phone=True)
    bo, _ = join(browser, link, "Bo")
    teacher.click("#workshop-ask")
    for page in (ada, bo):
        wait_text(page, "#workshop-question", "Question 1")
        assert page.locator("#workshop-send").is_enabled()
    ada.locator("#workshop-choice label").first.click()  # picked, not sent: the page still shows it

    remove_seat(ws, live_seat(bo)["token"])  # Bo's seat removed while the workshop goes on
    told_it_ended(bo, code, removed=True)
    assert ada.locator("#workshop-send").is_enabled()  # Ada's seat is there: nothing changed for her

    ada_tokens = tokens(ada)
    ada_token = live_seat(ada)["token"]
    teacher.click("#workshop-end")  # one click ends nothing: ending deletes every answer
    teacher.wait_for_selector("#workshop-end-yes", state="visible")
    # ...and the question is in sight (it opened below the screen's edge: fresh eyes at 1280x720)
    teacher.wait_for_function(
        "() => { const r = document.querySelector('#workshop-end-confirm').getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= innerHeight; }", timeout=5_000
    )  # fmt: skip
    assert "deleted with every answer" in teacher.inner_text("#workshop-end-confirm")
    teacher.click("#workshop-end-no")
    teacher.wait_for_selector("#workshop-end-yes", state="hidden")
    assert ws.pulse(code) is not None and ada.locator("#workshop-send").is_enabled()
    teacher.click("#workshop-end")
    teacher.click("#workshop-end-yes")
    told_it_ended(ada, code)
    assert tokens(ada) == ada_tokens  # everything on her page stays
    shot(ada, "workshop-ended-student-phone")
    # Her page stops asking (no further poll) and her token never went into an address.
    asked = len([u for u, _ in ada_sent if u.endswith("/workshop/wait")])
    ada.click("#step")  # her own step: she explores on her own, no teacher to follow any more
    ada.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n", arg=len(ada_tokens) + 1)
    assert len([u for u, _ in ada_sent if u.endswith("/workshop/wait")]) == asked
    assert not [s for s in ada_sent if ada_token in s[0] or ada_token in s[1]]
    for page in (teacher, ada, bo):
        page.context.close()


def test_the_teacher_link_secret_never_travels_in_a_request(browser, app):
    url = app[0]
    teacher, _, code = start_workshop(browser, url)
    teacher.click("#workshop-teacher-fold")
    teacher_link = teacher.locator("#workshop-teacher-link textarea, #workshop-teacher-link input").input_value()
    secret = teacher_link.split("teacher=", 1)[1]
    teacher.context.close()

    again, sent = open_context(browser, teacher_link)  # the teacher link, opened on another device
    wait_text(again, "#workshop-info", f"Workshop {code}")
    assert again.locator("#workshop-reveal").is_visible()  # it leads
    assert any("queue/join" in u for u, _ in sent)  # (the log did record the page's queue requests)
    after_load = [s for s in sent[1:] if secret in s[0] or secret in s[1]]  # (the page's own address: next)
    assert not after_load, f"{len(after_load)} of {len(sent)} requests carried the secret"
    assert secret not in again.url  # gone from the address bar (and the history)
    # The secret after "#": not even the page's own request carried it.
    assert teacher_link == f"{url}/?workshop={code}#teacher={secret}" and len(secret) >= 16
    assert secret not in sent[0][0]
    shot(again, "workshop-teacher-link-opened")
    again.context.close()

    forger, _ = open_context(browser, f"{url}/?workshop={code}#teacher=forged-{code}")
    forger.wait_for_selector("[data-testid=toast-body]:has-text('no place in that workshop')")
    assert not forger.locator("#workshop-reveal").is_visible()
    forger.context.close()


# ---------------------------------------------------------------- crafted requests (last: they use up misses)
def test_without_a_seat_a_live_code_answers_as_a_dead_one(app, ws):
    url = app[0]
    live = ws.start(LESSON)
    ended = ws.start(LESSON)
    seat = ws.join(ended.code, "", "10.0.0.1")
    ws.end(ended.code, ended.secret)
    with httpx.Client(base_url=url, timeout=30) as http:
        answers = set()
        for code, body in [
            ("ZZZZZZ", {"token": "guess"}), (live.code, {"token": "guess"}), (live.code, {"secret": "guess"}),
            (live.code, {}), (ended.code, {"token": seat.token}),
        ]:  # fmt: skip
            for path in ("/workshop/wait", "/workshop/round", "/workshop/answer"):
                said = http.post(path, json={"code": code, "seen": "", "round": 1, "choice": "x", **body})
                answers.add((said.status_code, said.content))
        assert answers == {(404, workshop_gate.no_seat().body)}
        assert http.post("/workshop/wait", json={"code": live.code, "secret": live.secret}).status_code == 200


def test_misses_are_throttled_per_address_whatever_x_forwarded_for_says(app, ws):
    """Each request claims another address; the app is not behind a balancer, so it counts the
    real one (127.0.0.1): past the limit, "wait a minute". Another address is not slowed."""
    url = app[0]
    live = ws.start(LESSON)
    seat = ws.join(live.code, "", "10.0.0.2")
    with httpx.Client(base_url=url, timeout=30) as http:
        said = []
        for i in range(MISSES + 1):
            forged = {"X-Forwarded-For": f"203.0.113.{i % 250}"}
            said.append(http.post("/workshop/round", json={"code": "ZZZZZZ", "token": "x"}, headers=forged))
            if said[-1].status_code == 429:
                break
        assert said[-1].status_code == 429 and "wait a minute" in said[-1].json()["error"]
        assert http.post("/workshop/round", json={"code": live.code, "token": seat.token}).status_code == 429
    elsewhere = httpx.HTTPTransport(local_address="127.0.0.2")  # another client, from another address
    with httpx.Client(base_url=url, timeout=30, transport=elsewhere) as http:
        assert http.post("/workshop/round", json={"code": live.code, "token": seat.token}).status_code == 200


def test_health_names_no_process_id(app):
    url, process, _ = app
    with urllib.request.urlopen(f"{url}/health", timeout=10) as reply:
        server = json.loads(reply.read())["server"]
    assert str(process.pid) not in server.split("-")


def test_no_refusal_left_a_traceback_in_the_apps_log(app):
    """Every refusal above (forged links, missing seats, throttled addresses) was one answer, never a bug."""
    from tests.browser.conftest import tracebacks

    assert not tracebacks((ARTIFACTS / "app-workshop-secrets.log").read_text())
