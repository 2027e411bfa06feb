"""A workshop end to end (issue 30), a teacher and three students in one Chromium, each in its own
browser context: start, join (one name with markup), follow the teacher, answer a lesson question,
the teacher's live count and chart, reveal, each student's result, a student exploring alone (a
reload keeps them so) and coming back, a forged teacher link, a teacher reload and a server
restart that keep everything, and the CSV holding exactly the answers given.

The app is this test's own (it restarts it), on a database file in a temporary folder; the right
answer is read from that database (the test knows it without asking the page)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from explorer import lessons
from explorer.ui.layout import BROWSER_KEY
from explorer.ui.panels.workshop.layout import WORKSHOP_KEY
from explorer.workshop import database
from tests.browser.conftest import free_port, running_app
from tests.browser.helpers import ARTIFACTS, idle, shot, tokens
from tests.browser.test_lessons_ui import open_lesson, wait_step

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = 3  # the KV cache: a decoder lesson whose first step has a question of four options
MARKUP_NAME = "<img src=x onerror=alert(1)>Bo"


def wait_page(page) -> None:
    """The page's session is back (the lesson's tab may be one without the self-attention figure)."""
    page.wait_for_selector("#token-strip .token", timeout=180_000)
    idle(page)


def open_page(browser, url: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(url)
    wait_page(page)
    return page


def open_workshop_panel(page) -> None:
    if not page.locator("#workshop-info").is_visible():
        page.click("#workshop")  # the accordion


def wait_text(page, selector: str, text: str, timeout: float = 60_000) -> None:
    page.wait_for_function(
        "([s, t]) => (document.querySelector(s)?.innerText || '').includes(t)", arg=[selector, text], timeout=timeout
    )


def join(browser, link: str, name: str):
    page = open_page(browser, link)
    assert page.locator("#workshop-code input, #workshop-code textarea").input_value() in link
    if name:
        page.fill("#workshop-name input, #workshop-name textarea", name)
    page.click("#workshop-join")
    wait_text(page, "#workshop-info", "You are in workshop")
    return page


def answer(page, option: str) -> None:
    page.locator("#workshop-choice label").filter(has_text=option).first.click()
    page.click("#workshop-send")
    wait_text(page, "#workshop-result", f"Your answer: {option}")


def wait_same_tokens(student, teacher_tokens: list[str]) -> None:
    student.wait_for_function(
        "n => document.querySelectorAll('#token-strip .token').length === n", arg=len(teacher_tokens)
    )
    assert tokens(student) == teacher_tokens


def open_round(db_url: str) -> dict:
    engine = sa.create_engine(db_url)
    with engine.connect() as db:
        row = db.execute(sa.select(database.rounds).order_by(database.rounds.c.id.desc())).first()
    engine.dispose()
    return {"options": json.loads(row.options), "answer": row.answer, "question": row.question}


CHART_COUNT = """([i, n]) => { const g = document.querySelector('#workshop-chart .js-plotly-plot');
    return g && g.data && Number(g.data[0].text[i]) === n; }"""


def chart_counts(page) -> list[int]:
    return page.evaluate(
        "() => { const g = document.querySelector('#workshop-chart .js-plotly-plot');"
        " return g && g.data ? Array.from(g.data[0].text).map(Number) : null; }"
    )


def download_csv(page) -> list[dict]:
    """The answers, in one click of "Download the answers (CSV)"."""
    with page.expect_download() as started:
        page.click("#workshop-csv-button")
    body = Path(started.value.path()).read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(body)))


def test_a_teacher_and_three_students_run_a_lesson_question(browser, tmp_path):
    db_url = f"sqlite:///{tmp_path / 'workshops.sqlite3'}"
    port = free_port()
    log = ARTIFACTS / "app-workshop.log"
    log.unlink(missing_ok=True)
    env = {"DECODER_EXPLORER_DATABASE_URL": db_url}
    with running_app(log, port=port, **env) as (url, _):
        teacher = open_page(browser, url)
        # Start waits for a lesson, and says so (it looked ready and refused after the click).
        teacher.get_by_text("Join or run a workshop").click()  # under the title: opens Lessons and Workshop
        start = teacher.locator("#workshop-start")
        start.wait_for(state="visible")
        assert teacher.locator("#lesson").is_visible()  # the lesson it asks for, in sight above it
        assert start.is_disabled() and "choose a lesson above first" in start.inner_text()
        teacher.click("#lesson input")
        teacher.click(f"[role=option][aria-label^='{LESSON}. ']")
        wait_step(teacher, LESSON, 0)
        teacher.wait_for_function("() => !document.querySelector('#workshop-start').disabled")
        assert start.inner_text() == f"Start a workshop on lesson {LESSON}"
        start.click()
        wait_text(teacher, "#workshop-info", "Workshop ")
        idle(teacher)
        student_link = teacher.locator("#workshop-student-link textarea, #workshop-student-link input").input_value()
        assert re.fullmatch(rf"{re.escape(url)}/\?workshop=[A-Z2-9]{{6}}", student_link), student_link
        code = student_link.rsplit("=", 1)[1]
        # The teacher link (with its secret) stays folded: not on the projected page.
        assert not teacher.locator("#workshop-teacher-link").is_visible()

        students = [join(browser, student_link, name) for name in ("Ada", MARKUP_NAME, "")]
        wait_text(teacher, "#workshop-info", "3 joined")
        info = teacher.inner_text("#workshop-info")
        assert MARKUP_NAME in info and "1 anonymous" in info  # the markup shown as text...
        assert teacher.locator("#workshop-info img").count() == 0  # ...and never made an element

        # Follow: the students see the teacher's lesson session and read its step, and its next token.
        teacher_tokens = tokens(teacher)
        for page in students:
            wait_same_tokens(page, teacher_tokens)
            wait_text(page, "#lesson-text", f"Lesson {LESSON}, step 1 of")
            assert lessons.step_of(LESSON, 0).title in page.inner_text("#lesson-text")
        teacher.click("#step")
        teacher.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n",
                                  arg=len(teacher_tokens) + 1)  # fmt: skip
        teacher_tokens = tokens(teacher)
        for page in students:
            wait_same_tokens(page, teacher_tokens)

        # Predict: the question goes out without its answer; the teacher's count and chart follow,
        # brought into view on a projector's 720 pixels (the Ask button at the screen's foot).
        teacher.set_viewport_size({"width": 1280, "height": 720})
        teacher.evaluate(
            "() => window.scrollBy(0, document.querySelector('#workshop-ask').getBoundingClientRect().bottom"
            " - innerHeight + 4)"
        )
        teacher.click("#workshop-ask")
        for page in students:
            wait_text(page, "#workshop-question", "Question 1")
        posed = open_round(db_url)
        assert posed["question"] == lessons.step_of(LESSON, 0).question
        wrong = next(o for o in posed["options"] if o != posed["answer"])
        for page in students:
            assert posed["answer"] not in page.inner_text("#workshop-result")
        answer(students[0], posed["answer"])
        answer(students[1], wrong)
        answer(students[2], wrong)
        answer(students[2], posed["answer"])  # a changed mind: the last answer counts
        wait_text(teacher, "#workshop-tally", "3 of 3 students answered")
        teacher.wait_for_function(CHART_COUNT, arg=[posed["options"].index(posed["answer"]), 2])  # the changed mind
        counts = dict(zip(posed["options"], chart_counts(teacher), strict=True))
        assert counts[posed["answer"]] == 2 and counts[wrong] == 1 and sum(counts.values()) == 3
        chart = teacher.evaluate("() => { const b = document.querySelector('#workshop-chart').getBoundingClientRect();"
                                 " return [b.top, b.bottom, innerHeight]; }")  # fmt: skip
        assert chart[0] >= 0 and chart[1] <= chart[2], chart  # the class's answers on the projector's screen
        teacher.screenshot(path=str(ARTIFACTS / "workshop-teacher-720-asked.png"))
        teacher.set_viewport_size({"width": 1280, "height": 900})
        shot(teacher, "workshop-teacher-before-reveal")

        # Reveal: each student sees the answer, why, and whether they were right.
        teacher.click("#workshop-reveal")
        wait_text(teacher, "#workshop-tally", "67% of the class was right")
        for page, right in zip(students, (True, False, True), strict=True):
            wait_text(page, "#workshop-result", "Right" if right else "Not this time")
        shot(students[1], "workshop-student-after-reveal")
        # Too late to answer: the page offers no way (and the server refuses one: tests/test_workshop.py).
        assert students[0].locator("#workshop-send").is_disabled()
        assert students[0].locator("#workshop-choice input").first.is_disabled()

        # A student explores alone (the teacher's steps leave them be), then comes back in one click.
        alone = students[2]
        alone.locator("#workshop-follow input").uncheck()
        wait_text(alone, "#workshop-info", "exploring on your own")
        kept = tokens(alone)
        teacher.click("#step")
        teacher.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n",
                                  arg=len(teacher_tokens) + 1)  # fmt: skip
        teacher_tokens = tokens(teacher)
        wait_same_tokens(students[0], teacher_tokens)  # a follower moved...
        assert tokens(alone) == kept  # ...the explorer did not
        # A step of their own, then a reload: still on their own, with their own tokens.
        before = alone.evaluate("k => localStorage.getItem(k)", BROWSER_KEY)
        alone.click("#step")
        alone.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n",
                                arg=len(kept) + 1)  # fmt: skip
        own = tokens(alone)
        # (the browser has kept the step's session: a reload before that would restore the one before)
        alone.wait_for_function("([k, v]) => localStorage.getItem(k) !== v", arg=[BROWSER_KEY, before])
        idle(alone)
        alone.reload()
        wait_page(alone)
        wait_text(alone, "#workshop-info", "exploring on your own")
        alone.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n", arg=len(own))
        assert tokens(alone) == own and not alone.locator("#workshop-follow input").is_checked()
        alone.click("#workshop-back")
        # (their own step may have chosen the teacher's token: the same tokens do not say Back ran)
        wait_text(alone, "#workshop-info", "You follow the teacher")
        wait_same_tokens(alone, teacher_tokens)
        assert alone.locator("#workshop-follow input").is_checked()

        # A forged teacher link (in the older form, the secret in the query) is refused as every
        # request without a seat is (tests/browser/test_workshop_secrets.py); the page opens as a student's would.
        forger = open_page(browser, f"{url}/?workshop={code}&teacher=forged-{code}")
        forger.wait_for_selector("[data-testid=toast-body]:has-text('no place in that workshop')")
        assert not forger.locator("#workshop-reveal").is_visible()
        forger.context.close()

        # The teacher reloads: the workshop, its tally and the teacher's view come back.
        teacher.reload()
        wait_page(teacher)
        wait_text(teacher, "#workshop-tally", "3 of 3 students answered")
        assert tokens(teacher) == teacher_tokens
    for page in (teacher, *students):
        page.goto("about:blank")

    with running_app(log, port=port, **env) as (url, _):  # a restart: a new process, the same database
        teacher.goto(url)
        wait_page(teacher)
        wait_text(teacher, "#workshop-tally", "67% of the class was right")
        wait_text(teacher, "#workshop-info", "3 joined")
        students[0].goto(url)
        wait_page(students[0])
        wait_text(students[0], "#workshop-info", "You are in workshop")
        wait_text(students[0], "#workshop-result", "Right")
        # The CSV holds exactly the answers given: one row per answer sent (the changed mind is two).
        rows = download_csv(teacher)
        given = sorted((row["name"], row["answer"], row["right"]) for row in rows)
        assert given == sorted(
            [
                ("Ada", posed["answer"], "yes"),
                (MARKUP_NAME, wrong, "no"),
                ("", wrong, "no"),
                ("", posed["answer"], "yes"),
            ]
        )
        assert {row["workshop"] for row in rows} == {code} and {row["before_reveal"] for row in rows} == {"yes"}
        shot(teacher, "workshop-teacher-after-restart")
    for page in (teacher, *students):
        page.context.close()
    assert Path(db_url.removeprefix("sqlite:///")).exists()


def refused(page, said: str) -> None:
    page.wait_for_selector(f"[data-testid=toast-body]:has-text('{said}')")


def test_a_teacher_locks_the_class_removes_a_seat_and_downloads_in_one_click(browser, tmp_path):
    """Issue 40, items 9, 4, 13, 12 and 7 on the teacher's panel: one network holds two seats until
    the teacher allows more; a closed workshop takes nobody new; a removed student's token stops
    working; the CSV comes in one click with every answer (plain question text) and its link dies
    with the workshop; a name that is a web address stays text; the browser lists the workshops it
    started, to lead (and end) one again."""
    db_url = f"sqlite:///{tmp_path / 'workshops.sqlite3'}"
    log = ARTIFACTS / "app-workshop-class.log"
    log.unlink(missing_ok=True)
    env = {"DECODER_EXPLORER_DATABASE_URL": db_url, "DECODER_EXPLORER_SEATS_PER_ADDRESS": "2"}
    with running_app(log, **env) as (url, _):
        teacher = open_page(browser, url)
        open_lesson(teacher, LESSON)
        wait_step(teacher, LESSON, 0)
        open_workshop_panel(teacher)
        assert not teacher.locator("#workshop-mine-open").is_visible()  # no workshop of this browser yet
        teacher.click("#workshop-start")
        wait_text(teacher, "#workshop-info", "At most 2 from one network")
        idle(teacher)  # (the page's script makes the links whole)
        link = teacher.locator("#workshop-student-link textarea, #workshop-student-link input").input_value()
        code = link.rsplit("=", 1)[1]

        web_name = "https://evil.example/x"
        ada, bo = join(browser, link, web_name), join(browser, link, "Bo")
        wait_text(teacher, "#workshop-info", "2 joined")
        assert web_name in teacher.inner_text("#workshop-info")
        assert teacher.locator("#workshop-info a").count() == 0  # the address is text, never a link

        # A third seat from the same network (every page here is 127.0.0.1) waits for the teacher.
        cy = open_page(browser, link)
        cy.fill("#workshop-name input, #workshop-name textarea", "Cy")
        cy.click("#workshop-join")
        refused(cy, "students from your network")
        seats = teacher.locator("#workshop-seats input")
        seats.fill("5")
        seats.press("Enter")
        wait_text(teacher, "#workshop-info", "At most 5 from one network")
        cy.click("#workshop-join")
        wait_text(cy, "#workshop-info", "You are in workshop")

        # Closed: nobody new joins; the class stays.
        teacher.locator("#workshop-lock input").click()
        wait_text(teacher, "#workshop-info", "Closed to new students")
        late = open_page(browser, link)
        late.click("#workshop-join")
        refused(late, "closed to new students")
        late.context.close()

        # A question: Ada changes her mind (two answers given), Bo answers.
        teacher.click("#workshop-ask")
        for page in (ada, bo):
            wait_text(page, "#workshop-question", "Question 1")
        posed = open_round(db_url)
        wrong = next(o for o in posed["options"] if o != posed["answer"])
        answer(ada, posed["answer"])
        answer(ada, wrong)
        answer(bo, wrong)
        wait_text(teacher, "#workshop-tally", "2 of 3 students answered")

        # Bo is removed: his seat's token stops working (tests/browser/test_workshop_secrets.py: his page is told).
        bo_seat = json.loads(bo.locator("#workshop-live textarea, #workshop-live input").input_value())
        teacher.click("#workshop-remove-pick input")
        teacher.click("[role=option][aria-label='2. Bo']")
        teacher.click("#workshop-remove")
        wait_text(teacher, "#workshop-info", "2 joined")
        assert "Bo" not in teacher.inner_text("#workshop-info")
        status = bo.evaluate(
            """seat => fetch('workshop/round', {method: 'POST', headers: {'Content-Type': 'application/json'},
                 body: JSON.stringify({code: seat.code, token: seat.token})}).then(r => r.status)""",
            bo_seat,
        )
        assert status == 404  # as any request without a seat (explorer.ui.workshop_gate)
        bo.wait_for_selector("#workshop-join", state="visible")  # his page is told: he may join another
        shot(teacher, "workshop-teacher-class-controls")

        # One click: every answer given, the question as plain text.
        rows = download_csv(teacher)
        assert [(r["name"], r["answer"]) for r in rows if r["name"] == web_name] == [
            (web_name, posed["answer"]), (web_name, wrong)
        ]  # fmt: skip
        assert "**" not in rows[0]["question"] and rows[0]["question"]
        answer(cy, posed["answer"])
        with teacher.expect_download() as started:  # a second click: the answers since, not the old file
            teacher.click("#workshop-csv-button")
        body = Path(started.value.path()).read_text(encoding="utf-8")
        assert len(list(csv.DictReader(io.StringIO(body)))) == 4 and "Cy" in body
        used = started.value.url
        assert teacher.evaluate("u => fetch(u).then(r => r.status)", used) == 404  # used once

        # The end: the workshop and every way to its answers are gone.
        teacher.click("#workshop-end")
        teacher.click("#workshop-end-yes")  # ending asks once more: it deletes every answer
        wait_text(teacher, "#workshop-info", f"Workshop {code} has ended")
        assert not list(Path(tmp_path).glob("*.csv"))

        # The browser keeps the workshops it started: a tab that lost its place lists them.
        teacher.click("#workshop-start")
        wait_text(teacher, "#workshop-info", "At most 2 from one network")  # (a new workshop: the default)
        idle(teacher)
        second = teacher.locator("#workshop-student-link textarea, #workshop-student-link input").input_value()
        second_code = second.rsplit("=", 1)[1]
        other_tab = teacher.context.new_page()
        other_tab.set_default_timeout(120_000)
        other_tab.goto(url)
        wait_page(other_tab)
        other_tab.evaluate("k => localStorage.removeItem(k)", WORKSHOP_KEY)
        other_tab.reload()
        wait_page(other_tab)
        open_workshop_panel(other_tab)
        other_tab.wait_for_selector("#workshop-mine-pick")
        assert second_code in other_tab.locator("#workshop-mine-pick input").input_value()
        shot(other_tab, "workshop-teacher-lists-their-workshops")
        other_tab.click("#workshop-mine-open")
        # (the lesson's step set up and the led tokens run again: slow on a busy machine)
        wait_text(other_tab, "#workshop-info", f"Workshop {second_code}", timeout=240_000)
        other_tab.click("#workshop-end")
        other_tab.click("#workshop-end-yes")
        wait_text(other_tab, "#workshop-info", f"Workshop {second_code} has ended")
        other_tab.wait_for_selector("#workshop-mine-open", state="hidden")  # none left to list
    for page in (teacher, ada, bo, cy):
        page.context.close()
