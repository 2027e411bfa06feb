"""A workshop that a phone can find and follow (issue 40, items 5 and 6), in a phone-sized context
(390x844, mobile, touch) and at 1280x720: the word "Workshop" on a fresh page's first screen; a
student link that opens a student's page, the join form on the first screen, then the question
first and the teacher's view with little else until the student explores on their own; the room
code large on the teacher's projected panel; and the words a student reads (no lesson Check that
does nothing, "exploring on your own" at once after their own Step).

Runs on the shared app (its workshops database under the cache folder); the workshop is ended at
the end. Screenshots: test-artifacts/workshop-phone-*.png."""

from __future__ import annotations

import pytest

from tests.browser.conftest import wait_ready
from tests.browser.helpers import idle, shot, tokens, wait_token_count
from tests.browser.test_accessibility import serious_violations
from tests.browser.test_lessons_ui import open_lesson, wait_step
from tests.browser.test_workshop_ui import wait_page, wait_text

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
PROJECTOR = {"viewport": {"width": 1280, "height": 720}}
LESSON = 3  # as tests/browser/test_workshop_ui.py: a first step whose question has four options

# Where each part of the page is on screen (none when it is not shown), after scrolling to the top.
BOXES = """selectors => selectors.map(s => {
    const el = document.querySelector(s);
    if (!el || !el.getClientRects().length) return null;
    const r = el.getBoundingClientRect();
    return r.width && r.height ? {top: r.top, bottom: r.bottom} : null; })"""
# The elements whose own text says "Workshop" and that are on the first screen, shown.
WORKSHOP_IN_SIGHT = """() => Array.from(document.querySelectorAll('body *')).filter(el => {
    const own = Array.from(el.childNodes).filter(n => n.nodeType === 3).map(n => n.textContent).join('');
    if (!/workshop/i.test(own) || !el.getClientRects().length) return false;
    const r = el.getBoundingClientRect(), style = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && r.top >= 0 && r.bottom <= innerHeight && style.visibility !== 'hidden'
        && Number(style.opacity) > 0; }).map(el => el.textContent.trim())"""
# The texts with a "%" that are shown (a probability: the candidates, a view's figures).
PERCENT_SHOWN = """() => Array.from(document.querySelectorAll('body *')).filter(el => {
    const own = Array.from(el.childNodes).filter(n => n.nodeType === 3).map(n => n.textContent).join('');
    return own.includes('%') && el.getClientRects().length && getComputedStyle(el).visibility !== 'hidden';
    }).map(el => el.textContent.trim())"""
# The explorer's own controls, folded away on a student's page while they follow.
EXPLORER_CONTROLS = ["#step", "#prompt", "#model", "#max-new", "#lesson-check", "#lesson-answer", "#workshop-start"]


# Whether an element is shown and wholly inside the window as it is scrolled now.
IN_VIEW = """s => { const el = document.querySelector(s); if (!el) return false;
    const r = el.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; }"""


def new_page(browser, app_url: str, device: dict, path: str = "/"):
    context = browser.new_context(**device)
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(app_url + path)
    return page


def boxes(page, *selectors: str) -> list[dict | None]:
    page.evaluate("() => window.scrollTo(0, 0)")
    return page.evaluate(BOXES, list(selectors))


def on_first_screen(page, selector: str) -> bool:
    (box,) = boxes(page, selector)
    return box is not None and box["top"] >= 0 and box["bottom"] <= page.viewport_size["height"]


def shown(page, selector: str) -> bool:
    return boxes(page, selector)[0] is not None


@pytest.mark.parametrize("device", [PHONE, PROJECTOR], ids=["phone-390x844", "1280x720"])
def test_a_fresh_page_shows_where_to_join_a_workshop(browser, app_url, device):
    page = new_page(browser, app_url, device)
    try:
        wait_ready(page)
        idle(page)
        width = device["viewport"]["width"]
        shot(page, f"workshop-phone-fresh-{width}")
        in_sight = page.evaluate(WORKSHOP_IN_SIGHT)
        assert in_sight, "no 'Workshop' on the first screen of a fresh page"
        page.get_by_text("Join or run a workshop").click()
        page.wait_for_selector("#workshop-code input, #workshop-code textarea", state="visible")
        page.wait_for_function("() => document.activeElement?.closest('#workshop-code')")
        box = page.locator("#workshop-code").bounding_box()  # scrolled into sight, ready to type in
        assert box["y"] >= 0 and box["y"] + box["height"] <= device["viewport"]["height"]
    finally:
        page.context.close()


def press_start(teacher, lesson: int) -> None:
    """On a teacher's fresh page: the lesson's first step, then Start a workshop on it."""
    wait_page(teacher)
    open_lesson(teacher, lesson)
    wait_step(teacher, lesson, 0)
    if not teacher.locator("#workshop-info").is_visible():
        teacher.click("#workshop")
    teacher.click("#workshop-start")


def start_workshop(browser, app_url: str, device: dict = PROJECTOR, lesson: int = LESSON):
    """The teacher (at 1280x720 unless told): lesson 3 unless told, a workshop started; (page,
    student link, code)."""
    teacher = new_page(browser, app_url, device)
    press_start(teacher, lesson)
    wait_text(teacher, "#workshop-info", "Workshop ")
    idle(teacher)
    link = teacher.locator("#workshop-student-link textarea, #workshop-student-link input").input_value()
    return teacher, link, link.rsplit("=", 1)[1]


def open_student_link(browser, link: str, device: dict, name: str):
    """A student opens the link: the join form on the first screen; then joined."""
    page = new_page(browser, link, device, path="")
    wait_page(page)
    width = device["viewport"]["width"]
    shot(page, f"workshop-phone-link-{width}")  # (before any assertion: the page as it opens)
    for part in ("#workshop-name", "#workshop-join"):
        assert on_first_screen(page, part), f"{part} is not on the first screen at {width} px"
    assert not shown(page, "#workshop-start")  # a student's page: join, not start
    # Nothing that predicts before joining: the default text's candidates (·Paris 77.3%) would
    # answer lesson 1's first question.
    assert page.evaluate(PERCENT_SHOWN) == [] and not shown(page, "#views")
    if name:
        page.fill("#workshop-name input, #workshop-name textarea", name)
    page.click("#workshop-join")
    try:
        wait_text(page, "#workshop-info", "You are in workshop", timeout=120_000)
    finally:
        shot(page, f"workshop-phone-joined-{width}")
    idle(page)
    return page


def test_a_student_link_opens_a_students_page_on_a_phone(browser, app_url):
    teacher, link, code = start_workshop(browser, app_url)
    students = []
    try:
        students.append(open_student_link(browser, link, PHONE, "Ada"))
        students.append(open_student_link(browser, link, PROJECTOR, ""))
        phone, desk = students
        # (c) The room code, for the back of the room: large, monospace, letter-spaced.
        room = teacher.locator("#workshop-room .room-code")
        assert room.inner_text().strip() == code
        size, family, spacing = room.evaluate(
            "el => { const s = getComputedStyle(el); return [parseFloat(s.fontSize), s.fontFamily, s.letterSpacing]; }"
        )
        assert size >= 48 and "mono" in family.lower() and spacing != "normal" and float(spacing[:-2]) > 0
        shot(teacher, "workshop-phone-teacher-room-code")
        assert serious_violations(teacher) == []

        assert shown(phone, "#candidates") and shown(phone, "#views")  # joined: the view is back
        # Once joined: the question first, then the view the teacher leads, and little else. A
        # phone scrolled down (reading the view) is brought to the question when it arrives.
        phone.evaluate("() => window.scrollTo(0, 500)")
        teacher.click("#workshop-ask")
        for page in students:
            wait_text(page, "#workshop-question", "Question 1")
            idle(page)
        phone.wait_for_function(IN_VIEW, arg="#workshop-question")
        shot(phone, "workshop-phone-question-390")
        question, strip = boxes(phone, "#workshop-question", "#token-strip")
        assert question is not None and strip is not None and question["bottom"] <= strip["top"]
        assert question["top"] >= 0 and question["bottom"] <= 844
        assert on_first_screen(phone, "#workshop-choice")
        assert shown(phone, "#views")  # the teacher's view
        folded = [part for part in EXPLORER_CONTROLS if shown(phone, part)]
        assert folded == [], f"shown on a following student's page: {folded}"
        # (The lesson's own answer and Check are away for a student: the teacher asks and reveals.)
        assert "Workshop panel" in phone.inner_text("#lesson-text")
        assert serious_violations(phone) == []

        # Exploring on their own brings the whole explorer back; "Back" folds it away again.
        phone.locator("#workshop-follow input").uncheck()
        wait_text(phone, "#workshop-info", "exploring on your own")
        phone.wait_for_selector("#step", state="visible")
        assert shown(phone, "#prompt") and not shown(phone, "#lesson-check")
        shot(phone, "workshop-phone-exploring-390")
        phone.click("#workshop-back")
        wait_text(phone, "#workshop-info", "You follow the teacher")
        phone.wait_for_selector("#step", state="hidden")

        # A student's own Step (the s key): their panel says at once that they explore on their own,
        # without the teacher moving, and the whole explorer is back.
        n = len(tokens(desk))
        desk.keyboard.press("s")
        wait_token_count(desk, n + 1)
        wait_text(desk, "#workshop-info", "exploring on your own")
        assert not desk.locator("#workshop-follow input").is_checked()
        desk.wait_for_selector("#step", state="visible")
    finally:
        if teacher.locator("#workshop-end").is_visible():
            teacher.click("#workshop-end")  # the shared app's workshops stay few
            teacher.click("#workshop-end-yes")  # (End asks once more)
            wait_text(teacher, "#workshop-info", "has ended")
        for page in (teacher, *students):
            page.context.close()
