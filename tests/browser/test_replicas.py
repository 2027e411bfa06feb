"""Two replicas behind nginx (issue 31), and one of them lost mid-class.

``python -m explorer.serve --replicas 2`` (what scripts/serve.sh runs) starts both and nginx; in
one Chromium: a teacher running a workshop and a student on r1, a student on r2 (both following
the teacher and answering), and two people exploring alone with their own texts, one on each.
Then r1 is killed with SIGKILL. Every page on r1 must notice, reload onto r2, and be stepping
again within 10 s with the tokens it had; the pages on r2 step on untouched; the workshop keeps
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

from explorer.serve.nginx import find_nginx
from tests.browser.conftest import running_replicas
from tests.browser.helpers import shot, tokens, type_prompt, wait_strip_starts_with, wait_token_count
from tests.browser.test_lessons_ui import open_lesson, wait_step
from tests.browser.test_workshop_ui import LESSON, answer, open_round, open_workshop_panel, wait_page, wait_text

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(find_nginx() is None, reason="nginx is not installed (Debian: apt-get install nginx)"),
]

RECOVERY_S = 10
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


def replica_pids(run_dir: Path) -> dict[str, int]:
    state = json.loads((run_dir / "replicas.json").read_text())
    return {r["name"]: r["pid"] for r in state["replicas"]}


def back_and_stepping(page, before: list[str], lost: str, killed_at: float) -> float:
    """Seconds from the kill until ``page`` (which was on ``lost``) is on another process, shows the
    tokens it had, and has stepped once more."""
    page.wait_for_function("lost => (document.body.dataset.server || lost).split('-')[0] !== lost", arg=lost,
                           timeout=RECOVERY_S * 1000)  # fmt: skip
    wait_page(page)
    page.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n", arg=len(before))
    assert tokens(page) == before
    page.click("#step")
    wait_token_count(page, len(before) + 1)
    assert tokens(page)[: len(before)] == before
    return time.monotonic() - killed_at


def test_a_replica_killed_mid_class(browser, tmp_path):
    db_url = f"sqlite:///{tmp_path / 'workshops.sqlite3'}"
    with running_replicas(tmp_path / "serve", 2, DECODER_EXPLORER_DATABASE_URL=db_url) as (url, supervisor, run_dir):
        teacher = open_on(browser, url, "r1")
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

        on_r1 = [teacher, students["r1"], explorers["r1"]]
        on_r2 = [students["r2"], explorers["r2"]]
        before = {id(page): tokens(page) for page in on_r1 + on_r2}
        assert before[id(students["r1"])] == before[id(teacher)] == before[id(students["r2"])]  # they follow

        lost = replica_pids(run_dir)["r1"]
        os.kill(lost, signal.SIGKILL)
        killed_at = time.monotonic()
        people = [students["r1"], explorers["r1"]]  # (the teacher does not step: the students would follow)
        recovered = [back_and_stepping(page, before[id(page)], "r1", killed_at) for page in people]
        print(f"seconds from the kill to stepping again, pages that were on r1: {[round(s, 1) for s in recovered]}")
        assert max(recovered) <= RECOVERY_S
        teacher.wait_for_function("() => (document.body.dataset.server || 'r1').startsWith('r2-')")
        wait_page(teacher)
        assert tokens(teacher) == before[id(teacher)]

        # Each page on r1 said in one line what happened; the pages on r2 saw nothing.
        for page in on_r1:
            assert "your session was brought back" in page.inner_text("#server-moved")
        shot(explorers["r1"], "replica-lost-page-back")
        for page in on_r2:
            assert page.locator("#server-moved").count() == 0
            assert server_of(page).startswith("r2-")
            n = len(before[id(page)])
            page.click("#step")
            wait_token_count(page, n + 1)
            assert tokens(page)[:n] == before[id(page)]

        # No cross-talk: each explorer still has its own text, and the other's words nowhere.
        for replica, page in explorers.items():
            wait_strip_starts_with(page, TEXTS[replica])
            other = TEXTS["r2" if replica == "r1" else "r1"]
            assert other.split()[1] not in "".join(tokens(page)).replace("·", " ")

        # No answer lost: the teacher's page (back from r1) counts both, each student sees theirs.
        wait_text(teacher, "#workshop-tally", "2 of 2 students answered")
        wait_text(students["r1"], "#workshop-result", f"Your answer: {posed['answer']}")
        wait_text(students["r2"], "#workshop-result", f"Your answer: {wrong}")

        # The supervisor started r1 again, on its port.
        deadline = time.monotonic() + 120
        while replica_pids(run_dir)["r1"] == lost:
            assert time.monotonic() < deadline, "the supervisor did not start r1 again"
            time.sleep(0.5)  # polling the supervisor's state file
        for page in on_r1 + on_r2:
            page.context.close()
        pids = [json.loads((run_dir / "replicas.json").read_text())["nginx_pid"], *replica_pids(run_dir).values()]
    assert supervisor.returncode == 0
    for pid in pids:  # everything it started has stopped
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
