"""Issue 40, items 1 and 2, as a learner and a class see them.

1. A lesson question is about the view on screen: a learner alone who moved on and presses Check
   gets the step's view back first; a teacher who moved on and asks the step's question puts the
   step's view back for the class, whose options are those of what their screen then shows.
2. Until the reveal (or a learner's Check), no page shows the answer of "which token will Step
   choose?" or "what token comes next?": the candidates (and the logit lens) are covered with a
   sentence that says why, on the teacher's page and a student's; the teacher's chart has no
   model bars before the reveal."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from explorer.ui.answer_cover import UNTIL_CHECKED, UNTIL_REVEALED
from explorer.workshop import database
from tests.browser.conftest import free_port, running_app
from tests.browser.helpers import ARTIFACTS, choose_head, choose_layer, idle, shot, tokens
from tests.browser.test_lessons_ui import answer, open_lesson, posed, wait_step
from tests.browser.test_workshop_ui import join, open_page, open_workshop_panel, wait_same_tokens, wait_text

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COVERED_WHY = "el => el.dataset.answerHidden || ''"


def covered(page, selector: str = "#candidates") -> str:
    """The sentence shown in place of a view ('' when it is shown), once the page's script looked."""
    page.wait_for_timeout(700)  # the script looks at least twice a second (not a timing assertion)
    return page.eval_on_selector(selector, COVERED_WHY)


def wait_covered(page, why: str, selector: str = "#candidates") -> None:
    page.wait_for_function("([s, w]) => document.querySelector(s)?.dataset.answerHidden === w", arg=[selector, why])


def wait_shown(page, selector: str = "#candidates") -> None:
    page.wait_for_function("s => { const e = document.querySelector(s); return e && !e.dataset.answerHidden; }",
                           arg=selector)  # fmt: skip


def answer_visible_in_candidates(page, token: str) -> bool:
    return page.locator("#candidates").get_by_text(token, exact=True).filter(visible=True).count() > 0


def cover_sentence(page, selector: str = "#candidates") -> str:
    """What a person reads in place of the covered view (the cover's ::before)."""
    return page.eval_on_selector(selector, "el => getComputedStyle(el, '::before').content")


# ---------------------------------------------------------------- a learner alone
def test_a_learner_alone_predicts_the_next_token_before_seeing_it(page):
    open_lesson(page, 1)
    wait_step(page, 1, 0)
    question = posed(1, 0)
    wait_covered(page, UNTIL_CHECKED)
    assert UNTIL_CHECKED in cover_sentence(page)
    assert not page.locator("#candidates table").is_visible()
    assert not answer_visible_in_candidates(page, question.answer)
    shot(page, "lesson-next-token-covered")
    # The logit lens's top row is the prediction too: covered as well.
    page.click("#views button[role=tab]:has-text('Logit lens')")
    idle(page)
    wait_covered(page, UNTIL_CHECKED, "#logit-lens")
    # Check (even a wrong answer) shows them again.
    wrong = next(option for option in question.options if option != question.answer)
    assert answer(page, wrong).startswith("✗ Not quite")
    wait_shown(page)
    wait_shown(page, "#logit-lens")
    page.wait_for_function("t => document.querySelector('#candidates').innerText.includes(t)", arg=question.answer)
    assert answer_visible_in_candidates(page, question.answer)


def test_a_learners_check_is_about_the_steps_own_view(page):
    """Lesson 4: the learner moves to layer 5, head 3, then checks the step's answer: the step's
    view comes back first and nothing is checked; then Check checks."""
    open_lesson(page, 4)
    wait_step(page, 4, 0)
    question = posed(4, 0)
    choose_layer(page, 5)
    choose_head(page, 3)
    idle(page)
    said = answer(page, question.answer)
    assert "view is back" in said and "layer 5" in said and "head 3" in said, said
    assert page.input_value("#layer input[type=number]") == str(question.layer)
    assert page.input_value("#head input") == f"head {question.head}"
    assert answer(page, question.answer).startswith("✓ Right")
    assert covered(page) == ""  # a head's question covers nothing: the heatmap is what it asks to read


# ---------------------------------------------------------------- a class
def last_round(db_url: str) -> dict:
    engine = sa.create_engine(db_url)
    with engine.connect() as db:
        row = db.execute(sa.select(database.rounds).order_by(database.rounds.c.id.desc())).first()
    engine.dispose()
    return {"options": json.loads(row.options), "answer": row.answer, "kind": row.kind}


def chart_traces(page) -> list[str]:
    return page.evaluate(
        "() => { const g = document.querySelector('#workshop-chart .js-plotly-plot');"
        " return g && g.data ? g.data.map(t => t.name) : []; }"
    )


def student_options(page) -> list[str]:
    return page.eval_on_selector_all("#workshop-choice label", "els => els.map(e => e.innerText.trim())")


def test_a_class_is_asked_about_the_view_it_sees_and_predicts_before_seeing(browser, tmp_path):
    db_url = f"sqlite:///{tmp_path / 'workshops.sqlite3'}"
    log = ARTIFACTS / "app-lesson-questions.log"
    log.unlink(missing_ok=True)
    with running_app(log, port=free_port(), DECODER_EXPLORER_DATABASE_URL=db_url) as (url, _):
        teacher = open_page(browser, url)
        open_lesson(teacher, 4)
        wait_step(teacher, 4, 0)
        set_up_tokens = tokens(teacher)
        open_workshop_panel(teacher)
        teacher.click("#workshop-start")
        wait_text(teacher, "#workshop-info", "Workshop ")
        idle(teacher)
        link = teacher.locator("#workshop-student-link textarea, #workshop-student-link input").input_value()
        student = join(browser, link, "Ada")
        wait_same_tokens(student, set_up_tokens)

        # Item 1: the teacher moves on (Step, layer 5, head 3), then asks the step's question.
        teacher.click("#step")
        teacher.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n",
                                  arg=len(set_up_tokens) + 1)  # fmt: skip
        choose_layer(teacher, 5)
        choose_head(teacher, 3)
        idle(teacher)
        teacher.click("#workshop-ask")
        wait_text(teacher, "#workshop-tally", "put back")
        question = posed(4, 0)
        assert tokens(teacher) == set_up_tokens
        assert teacher.input_value("#layer input[type=number]") == str(question.layer)
        # The student's screen shows the step's view, and the options are that view's tokens.
        wait_text(student, "#workshop-question", "Question 1")
        wait_same_tokens(student, set_up_tokens)
        student.wait_for_function("v => document.querySelector('#layer input[type=number]').value === v",
                                  arg=str(question.layer))  # fmt: skip
        asked = last_round(db_url)
        assert student_options(student) == asked["options"] == question.options
        assert asked["answer"] == question.answer
        for option in asked["options"]:  # each names a token where the student's strip has it
            position, text = option.split(" ", 1)
            assert tokens(student)[int(position)] == text
        shot(teacher, "lesson-question-asked-on-the-steps-view")

        # Item 2: lesson 1's "which token will Step choose?": covered on both pages until the reveal.
        teacher.click("#workshop-reveal")
        idle(teacher)
        open_lesson_again(teacher, 1)
        wait_step(teacher, 1, 0)
        greedy = posed(1, 0)
        wait_covered(teacher, UNTIL_REVEALED)
        wait_text(student, "#lesson-text", "Lesson 1, step 1")
        wait_covered(student, UNTIL_REVEALED)
        assert not answer_visible_in_candidates(student, greedy.answer)
        teacher.click("#workshop-ask")
        wait_text(student, "#workshop-question", "Question 2")
        wait_covered(student, UNTIL_REVEALED)
        wait_covered(teacher, UNTIL_REVEALED)
        shot(student, "lesson-next-token-covered-student")
        student.locator("#workshop-choice label").filter(has_text=greedy.answer).first.click()
        student.click("#workshop-send")
        wait_text(teacher, "#workshop-tally", "1 of 1 students answered")
        wait_covered(teacher, UNTIL_REVEALED)  # the class answering uncovers nothing
        shot(teacher, "lesson-next-token-covered-teacher")
        teacher.click("#workshop-reveal")
        wait_text(student, "#workshop-result", "Right")
        wait_shown(student)
        wait_shown(teacher)
        assert answer_visible_in_candidates(student, greedy.answer)

        # "What token comes next?": covered from the question to the reveal; the chart's model bars after it.
        teacher.click("#step")
        teacher.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n",
                                  arg=len(tokens(student)) + 1)  # fmt: skip
        idle(teacher)
        teacher.click("#workshop-ask-next")
        wait_text(student, "#workshop-question", "Question 3")
        wait_covered(student, UNTIL_REVEALED)
        wait_covered(teacher, UNTIL_REVEALED)
        teacher.wait_for_function("() => document.querySelector('#workshop-chart .js-plotly-plot')?.data")
        assert chart_traces(teacher) == ["the class"]
        teacher.locator("#workshop-chart").screenshot(path=str(ARTIFACTS / "workshop-chart-before-reveal.png"))
        # A student who explores on their own meanwhile cannot Step to the answer (fresh eyes did,
        # then sent it): Step and Generate wait for the reveal, the s key too.
        student.locator("#workshop-follow input").uncheck()
        wait_text(student, "#workshop-info", "exploring on your own")
        held = "id => document.getElementById(id)?.disabled"
        for button in ("step", "generate"):
            student.wait_for_function(held, arg=button)
        for button, name in (("step", "Step"), ("generate", "Generate")):  # each says why, not only greyed
            said = student.evaluate("id => getComputedStyle(document.getElementById(id), '::after').content", button)
            assert f"{name}: after the reveal" in said, said
        student.screenshot(path=str(ARTIFACTS / "student-step-held.png"))
        own = tokens(student)
        student.keyboard.press("s")
        assert covered(student) == UNTIL_REVEALED and tokens(student) == own
        teacher.click("#workshop-reveal")
        wait_shown(student)
        wait_shown(teacher)
        student.wait_for_function("() => !document.getElementById('step').disabled")
        student.click("#workshop-back")
        wait_text(student, "#workshop-info", "You follow the teacher")
        teacher.wait_for_function(
            "() => (document.querySelector('#workshop-chart .js-plotly-plot')?.data || []).length === 2"
        )
        assert chart_traces(teacher) == ["the class", "the model's probability"]

        # Back on lesson 1's step (Undo), "what token comes next?" instead of the step's question:
        # its reveal names the same token, so it uncovers the step on both pages.
        stepped = len(tokens(teacher))
        teacher.click("#undo")
        teacher.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n",
                                  arg=stepped - 1)  # fmt: skip
        wait_covered(teacher, UNTIL_REVEALED)
        wait_covered(student, UNTIL_REVEALED)
        idle(teacher)
        teacher.click("#workshop-ask-next")
        wait_text(student, "#workshop-question", "Question 4")
        teacher.click("#workshop-reveal")
        wait_text(student, "#workshop-result", "answer")
        wait_shown(student)
        wait_shown(teacher)
        assert answer_visible_in_candidates(student, greedy.answer)
        for page in (teacher, student):
            page.context.close()


def open_lesson_again(page, number: int) -> None:
    """The Lessons list while its panel is open (the workshop's panel is inside it)."""
    page.click("#lesson input")
    page.click(f"[role=option][aria-label^='{number}. ']")
