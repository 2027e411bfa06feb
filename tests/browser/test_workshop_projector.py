"""A workshop on a classroom projector (1280x720) and a student's page, as fresh eyes saw them: the
teacher's panel no longer pushes the token strip and the candidates below the first screen.

Runs on the shared app (its workshops database under the cache folder); every workshop started
here is ended before the test ends. Screenshots: test-artifacts/workshop-projector-*.png."""

from __future__ import annotations

import pytest

from explorer import lessons
from explorer.ui.answer_cover import UNTIL_CHECKED
from tests.browser.conftest import running_app, wait_ready
from tests.browser.helpers import ARTIFACTS, idle
from tests.browser.test_lesson_questions_ui import wait_covered
from tests.browser.test_lessons_ui import open_lesson, wait_step
from tests.browser.test_workshop_phone import IN_VIEW, PHONE, PROJECTOR, boxes, new_page, press_start
from tests.browser.test_workshop_phone import start_workshop as phone_start_workshop
from tests.browser.test_workshop_ui import join, wait_page, wait_text

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = 1  # its first step is set up at once (no tokens generated)


def start_workshop(browser, app_url: str, device: dict = PROJECTOR):
    """The teacher: lesson 1, a workshop started; (page, student link, code)."""
    return phone_start_workshop(browser, app_url, device, LESSON)


def end_workshop(teacher) -> None:
    """The shared app's workshops stay few (one network runs at most 3)."""
    if teacher.locator("#workshop-end").is_visible():
        teacher.click("#workshop-end")
        teacher.click("#workshop-end-yes")  # (End asks once more)
        wait_text(teacher, "#workshop-info", "has ended")


def test_a_running_workshop_keeps_the_strip_and_the_candidates_on_the_projectors_first_screen(browser, app_url):
    teacher, _, code = start_workshop(browser, app_url)
    try:
        # Just started: the room code in sight (the page stayed where Start had been, on the
        # student link, with the code and the question's buttons above the screen's edge).
        teacher.wait_for_function(IN_VIEW, arg="#workshop-room .room-code")
        assert teacher.evaluate(IN_VIEW, "#workshop-ask")
        strip, candidates, room, ask, link, lesson = boxes(
            teacher, "#token-strip", "#candidates", "#workshop-room .room-code", "#workshop-ask",
            "#workshop-student-link", "#lesson-text",
        )  # fmt: skip
        teacher.screenshot(path=str(ARTIFACTS / "workshop-projector-1280x720.png"))
        for name, box in (("token strip", strip), ("candidates", candidates)):
            assert box is not None and box["top"] >= 0 and box["bottom"] <= 720, f"{name} off the first screen: {box}"
        # The panel follows them: the room code (still large) and the question's buttons first,
        # the student link after them, the lesson's text after the panel.
        assert candidates["bottom"] <= room["top"] < ask["top"] < link["top"] < lesson["top"]
        assert teacher.locator("#workshop-room .room-code").inner_text().strip() == code
        size = teacher.eval_on_selector("#workshop-room .room-code", "el => parseFloat(getComputedStyle(el).fontSize)")
        assert size >= 48
        # Next step sets up the class's next view: the projector goes back to it (it stayed on the
        # lesson's text, below the panel, the tokens and the candidates off screen).
        teacher.click("#lesson-next")
        wait_step(teacher, LESSON, 1)
        teacher.wait_for_function(IN_VIEW, arg="#token-strip")
    finally:
        end_workshop(teacher)
    # Ended: the page's own order again (the Lessons panel above the tokens).
    lessons, strip = boxes(teacher, "#lessons", "#token-strip")
    assert lessons["bottom"] <= strip["top"]
    teacher.context.close()


# Where the covered view's sentence is on screen (its ::before, at the top of the covered box).
COVER_SENTENCE_BOX = """s => { const el = document.querySelector(s), r = el.getBoundingClientRect();
    const why = getComputedStyle(el, '::before'), top = r.top + (parseFloat(why.top) || 0);
    return {top, bottom: top + parseFloat(why.height), text: why.content}; }"""


def test_the_logit_lens_cover_says_why_on_the_first_screen(browser, app_url):
    """A question asks which token Step will choose: the Logit lens (its top row is the answer) is
    covered, and the sentence that says so is on a 720-pixel projector's first screen, not centred
    in the lens's tall box below it."""
    page = new_page(browser, app_url, PROJECTOR)
    try:
        wait_page(page)
        open_lesson(page, LESSON)
        wait_step(page, LESSON, 0)
        page.click("#views button[role=tab]:has-text('Logit lens')")
        page.wait_for_selector("#logit-lens .js-plotly-plot", state="attached")  # (drawn, covered)
        wait_covered(page, UNTIL_CHECKED, "#logit-lens")
        idle(page)
        page.evaluate("() => window.scrollTo(0, 0)")
        sentence = page.evaluate(COVER_SENTENCE_BOX, "#logit-lens")
        page.screenshot(path=str(ARTIFACTS / "workshop-projector-lens-covered.png"))
        assert UNTIL_CHECKED in sentence["text"]
        assert sentence["top"] >= 0 and sentence["bottom"] <= 720, sentence
        assert page.eval_on_selector("#logit-lens", "el => el.getBoundingClientRect().height") > 400  # (a tall box)
    finally:
        page.context.close()


def test_a_start_refused_by_the_networks_limit_is_said_beside_the_button(browser, tmp_path):
    """One network runs at most N workshops: a teacher refused sees why and what to do in the
    panel, beside Start, not only in a toast that fades top-right; it names no other workshop."""
    env = {
        "DECODER_EXPLORER_DATABASE_URL": f"sqlite:///{tmp_path / 'workshops.sqlite3'}",
        "DECODER_EXPLORER_WORKSHOPS_PER_CLIENT": "1",
    }
    log = ARTIFACTS / "app-workshop-limit.log"
    log.unlink(missing_ok=True)
    with running_app(log, **env) as (url, _):
        first, _, code = start_workshop(browser, url)
        second = new_page(browser, url, PROJECTOR)
        try:
            press_start(second, LESSON)
            note = second.locator("#workshop-start-note")
            note.wait_for(state="visible")
            said = note.inner_text()
            assert "No workshop was started" in said and "Your network already runs 1 workshop," in said
            assert "end one first" in said and code not in said
            start, box = second.locator("#workshop-start").bounding_box(), note.bounding_box()
            assert 0 <= box["y"] - (start["y"] + start["height"]) < 60  # right under the button
            second.wait_for_function(IN_VIEW, arg="#workshop-start-note")  # scrolled into sight
            second.screenshot(path=str(ARTIFACTS / "workshop-projector-start-refused.png"))
            second.wait_for_selector("[data-testid=toast-body]", state="detached", timeout=60_000)
            assert note.is_visible()  # the toast faded; the panel still says it
            # The next try, once the first workshop ended: started, and the note is gone.
            end_workshop(first)
            second.click("#workshop-start")
            wait_text(second, "#workshop-info", "Workshop ")
            end_workshop(second)  # (Start is back, with nothing said beside it)
            second.wait_for_selector("#workshop-start", state="visible")
            assert not second.locator("#workshop-start-note").is_visible()
        finally:
            end_workshop(second)
            for page in (first, second):
                page.context.close()


def test_a_student_exploring_on_their_own_reads_which_lesson_the_teacher_leads(browser, app_url):
    """Unticked "Follow the teacher": the whole explorer is back, but the Lessons list is the
    teacher's (it showed blank beside "Lesson 1, step 1 of 2 … (your teacher leads)"): hidden, and
    the panel's text names the lesson."""
    teacher, link, _ = start_workshop(browser, app_url)
    student = None
    try:
        student = join(browser, link, "Ada")
        student.locator("#workshop-follow input").uncheck()
        wait_text(student, "#workshop-info", "exploring on your own")
        student.wait_for_selector("#step", state="visible")
        idle(student)
        title = lessons.lesson(LESSON).title
        wait_text(student, "#lesson-text", f"(your teacher leads {title})")
        assert not student.locator("#lesson").is_visible()
        student.screenshot(path=str(ARTIFACTS / "workshop-projector-student-own.png"), full_page=True)
    finally:
        end_workshop(teacher)
        for page in (teacher, student):
            if page is not None:
                page.context.close()


@pytest.mark.parametrize(("device", "shown"), [(PHONE, False), (PROJECTOR, True)], ids=["phone", "1280x720"])
def test_the_keys_hint_is_for_a_keyboard(browser, app_url, device, shown):
    """The header's "Keys: s Step, u Undo, ← → move the query" on a phone (touch, no keys): hidden
    there, kept on a desktop."""
    page = new_page(browser, app_url, device)
    try:
        wait_ready(page)
        intro = page.inner_text("#intro")
        assert "Press Step" in intro and "Join or run a workshop" in intro
        assert ("Undo" in intro) is shown, intro
        width = device["viewport"]["width"]
        page.screenshot(path=str(ARTIFACTS / f"workshop-projector-intro-{width}.png"))
    finally:
        page.context.close()
