"""Two replicas behind nginx (issue 31), and one of them lost mid-class.

``python -m explorer.serve --replicas 2`` (what scripts/serve.sh runs) starts both and nginx; in
one Chromium: a teacher running a workshop on r2, a student on each replica (both following the
teacher and answering), and two people exploring alone with their own texts, one on each.
Then r1 is killed with SIGKILL. Every page on r1 must notice, reload onto r2, and be stepping
again with the tokens it had (the seconds it took are printed: a time is measured, never asserted, on a
shared machine); the pages on r2 step on untouched; the workshop keeps
both answers (its database is shared); nobody sees anyone else's tokens; the supervisor starts
r1 again; stopping the supervisor stops every process it started.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from playwright.sync_api import Error as PlaywrightError

from explorer.serve.nginx import find_nginx
from explorer.workshop import database
from tests.browser.conftest import running_replicas
from tests.browser.helpers import shot, tokens, type_prompt, wait_strip_starts_with, wait_token_count
from tests.browser.test_lessons_ui import open_lesson, wait_step
from tests.browser.test_workshop_ui import LESSON, answer, open_round, open_workshop_panel, wait_page, wait_text

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(find_nginx() is None, reason="nginx is not installed (Debian: apt-get install nginx)"),
]

TEXTS = {"r1": "The lighthouse keeper wrote in his log that", "r2": "Seven small boats left the harbour before"}


def open_on(browser, url: str, replica: str):
    """A page in a browser of its own that nginx sends to ``replica`` (its routing cookie set, as
    nginx would have set it at a first visit)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "de_replica", "value": replica, "domain": "127.0.0.1", "path": "/"}])
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(url)
    wait_page(page)
    assert server_of(page).startswith(f"{replica}-")
    return page


def server_of(page) -> str:
    """The process the page's script found serving it (explorer/ui/health.py)."""
    page.wait_for_function("() => document.body.dataset.server")
    return page.evaluate("() => document.body.dataset.server")


def explore(page, text: str) -> None:
    type_prompt(page, text)
    page.click("#step")
    wait_strip_starts_with(page, text)
    count = len(tokens(page))
    page.click("#step")
    wait_token_count(page, count + 1)


def stored_answers(db_url: str) -> list[str]:
    engine = sa.create_engine(db_url)
    with engine.connect() as db:
        answers = sorted(db.execute(sa.select(database.answers.c.answer)).scalars())
    engine.dispose()
    return answers


def replica_pids(run_dir: Path) -> dict[str, int]:
    state = json.loads((run_dir / "replicas.json").read_text())
    return {r["name"]: r["pid"] for r in state["replicas"]}


READY = """([lost, n]) => {
    const server = document.body.dataset.server || lost;
    return server.split('-')[0] !== lost && !document.querySelector('.generating, .pending')
        && document.querySelectorAll('#token-strip .token').length === n; }"""


def shows(page, script: str, arg) -> bool:
    """``script`` is true in the page now (false while the page is reloading)."""
    try:
        return bool(page.evaluate(script, arg))
    except PlaywrightError:  # its document went away under the question: a reload
        return False


def step_once(page) -> None:
    """Step: the button, or its key (s) on a following student's page, where the explorer's
    controls are folded away (issue 40: a student's page shows the question and the teacher's view)."""
    if page.locator("#step").is_visible():
        page.click("#step")
    else:
        page.keyboard.press("s")


def back_and_stepping(pages: list, before: dict, lost: str, killed_at: float) -> list[float]:
    """Seconds from the kill until each page (each was on ``lost``) is on another process, shows
    the tokens it had, and has stepped once more. The pages are watched together (each is a
    browser of its own: one's recovery does not wait for another's check)."""
    stepped: dict[int, float] = {}
    clicked: set[int] = set()
    while len(stepped) < len(pages):
        assert time.monotonic() - killed_at < 60, "a page did not come back within 60 s"
        for page in pages:
            n = len(before[id(page)])
            if id(page) not in clicked and shows(page, READY, [lost, n]):
                assert tokens(page) == before[id(page)]
                step_once(page)
                clicked.add(id(page))
            elif id(page) in clicked and id(page) not in stepped and len(tokens(page)) == n + 1:
                stepped[id(page)] = time.monotonic() - killed_at
                assert tokens(page)[:n] == before[id(page)]
        time.sleep(0.1)  # polling several pages at once (Playwright's sync API waits on one)
    return [stepped[id(page)] for page in pages]


def test_a_replica_killed_mid_class(browser, tmp_path):
    db_url = f"sqlite:///{tmp_path / 'workshops.sqlite3'}"
    with running_replicas(tmp_path / "serve", 2, DECODER_EXPLORER_DATABASE_URL=db_url) as (url, supervisor, run_dir):
        teacher = open_on(browser, url, "r2")
        open_lesson(teacher, LESSON)
        wait_step(teacher, LESSON, 0)
        open_workshop_panel(teacher)
        teacher.click("#workshop-start")
        wait_text(teacher, "#workshop-info", "Workshop ")
        box = teacher.locator("#workshop-student-link textarea, #workshop-student-link input")
        teacher.wait_for_function("box => box.value.startsWith('http')", arg=box.element_handle())
        link = box.input_value()
        students = {}
        for replica, name in (("r1", "Ada"), ("r2", "Bo")):  # a student on each replica
            page = open_on(browser, link, replica)
            page.fill("#workshop-name input, #workshop-name textarea", name)
            page.click("#workshop-join")
            wait_text(page, "#workshop-info", "You are in workshop")
            students[replica] = page
        wait_text(teacher, "#workshop-info", "2 joined")
        explorers = {replica: open_on(browser, url, replica) for replica in ("r1", "r2")}
        for replica, page in explorers.items():
            explore(page, TEXTS[replica])

        teacher.click("#workshop-ask")
        posed = open_round(db_url)
        wrong = next(o for o in posed["options"] if o != posed["answer"])
        for page, option in ((students["r1"], posed["answer"]), (students["r2"], wrong)):
            wait_text(page, "#workshop-question", "Question 1")
            answer(page, option)
        wait_text(teacher, "#workshop-tally", "2 of 2 students answered")

        on_r1 = [students["r1"], explorers["r1"]]
        on_r2 = [students["r2"], explorers["r2"]]  # and the teacher, who does not step (the students would follow)
        before = {id(page): tokens(page) for page in [teacher, *on_r1, *on_r2]}
        assert before[id(students["r1"])] == before[id(teacher)] == before[id(students["r2"])]  # they follow

        lost = replica_pids(run_dir)["r1"]
        os.kill(lost, signal.SIGKILL)
        killed_at = time.monotonic()
        recovered = back_and_stepping(on_r1, before, "r1", killed_at)
        # The target is 10 s (docs/replicas.md); timed here, not asserted: under a loaded machine's
        # 2 cores it took 10-22 s (back_and_stepping gives up after 60 s: a page that never came back).
        print(f"seconds from the kill to stepping again, pages that were on r1: {[round(s, 1) for s in recovered]}")

        # Each page on r1 said in one line what happened; the pages on r2 saw nothing.
        for page in on_r1:
            assert "your session was brought back" in page.inner_text("#server-moved")
        shot(explorers["r1"], "replica-lost-page-back")
        for page in (teacher, *on_r2):
            assert page.locator("#server-moved").count() == 0
            assert server_of(page).startswith("r2-")
            n = len(before[id(page)])
            step_once(page)
            wait_token_count(page, n + 1)
            assert tokens(page)[:n] == before[id(page)]

        # No cross-talk: each explorer still has its own text, and the other's words nowhere.
        for replica, page in explorers.items():
            wait_strip_starts_with(page, TEXTS[replica])
            other = TEXTS["r2" if replica == "r1" else "r1"]
            assert other.split()[1] not in "".join(tokens(page)).replace("·", " ")

        # No answer lost: the teacher's page counts both, each student (the one on r1 back) sees theirs.
        wait_text(teacher, "#workshop-tally", "2 of 2 students answered")
        wait_text(students["r1"], "#workshop-result", f"Your answer: {posed['answer']}")
        wait_text(students["r2"], "#workshop-result", f"Your answer: {wrong}")
        assert stored_answers(db_url) == sorted([posed["answer"], wrong])

        # The supervisor started r1 again, on its port.
        deadline = time.monotonic() + 120
        while replica_pids(run_dir)["r1"] == lost:
            assert time.monotonic() < deadline, "the supervisor did not start r1 again"
            time.sleep(0.5)  # polling the supervisor's state file
        for page in (teacher, *on_r1, *on_r2):
            page.context.close()
        pids = [json.loads((run_dir / "replicas.json").read_text())["nginx_pid"], *replica_pids(run_dir).values()]
        # The run folder is the operator's alone, and nginx logged each page's path, never its
        # query string (the student link's ?workshop=..., issue 40 item 10).
        assert run_dir.stat().st_mode & 0o777 == 0o700
        logged = (run_dir / "nginx-access.log").read_text()
        assert '"GET / HTTP/1.1"' in logged and "?" not in logged
    assert supervisor.returncode == 0
    for pid in pids:  # everything it started has stopped
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
