"""Issue 40, items 1 and 2, on the server: a lesson question is about the view the class (or a
learner alone) is looking at, and nothing shows the answer of a "which token comes next?"
question before it is revealed or checked.

1. Asking a step's question (the workshop) or checking an answer (a learner alone) after the view
   moved on puts the step's own view back first; the question's options and answer are those of
   the view then on screen.
2. What covers the next token, and when (``explorer.ui.answer_cover``; the page's script covers
   it: tests/browser/test_lesson_questions_ui.py), the teacher's chart without the model's bars
   before the reveal, and a student's question saying to cover while it is open."""

from __future__ import annotations

import dataclasses
import json
import re
from types import SimpleNamespace

import gradio as gr
import pytest

from explorer import lessons
from explorer.present.workshop_seats import Leading
from explorer.ui import answer_cover, lesson_events, lifecycle, workshop_events, workshop_round
from explorer.ui.shown import current_snapshot
from explorer.viz.workshop import tally_figure
from explorer.workshop import Workshops, connect
from explorer.workshop.questions import NEXT_TOKEN_TITLE, lesson_question, lesson_title, next_token_question

REQUEST = SimpleNamespace(session_hash="test-lesson-questions")


@pytest.fixture
def ws(tmp_path, monkeypatch):
    store = Workshops(connect(f"sqlite:///{tmp_path / 'w.sqlite3'}"))
    monkeypatch.setattr(workshop_events, "_store", store)
    return store


def set_up(number: int, index: int):
    return lesson_events.set_up(REQUEST, None, number, index, None)["state"]


def moved_on(st) -> None:
    """What the teacher of issue 40 did after setting up lesson 4: Step, layer 5, head 3, Logit lens."""
    st.session.step()
    st.layer, st.head, st.tab = 5, "3", "lens"


# ---------------------------------------------------------------- 1. the step's own view
def test_asking_after_the_teacher_moved_on_puts_the_steps_view_back_first(ws):
    st = set_up(4, 0)
    step_view = current_snapshot(st)
    started = ws.start(4)
    st.workshop = Leading(started.code, started.secret, 4)
    moved_on(st)
    out = workshop_events.on_ask(REQUEST, st)
    # The teacher's page shows the step's view again: its tokens, layer, head and tab...
    assert current_snapshot(st) == step_view
    # ...published for the class before the question (students take it: a newer view version)...
    _, view = ws.led_view(started.code)
    assert view["session"]["generated"] == step_view.generated and view["session"]["layer"] == step_view.layer
    assert view["session"]["head"] == step_view.head and view["session"]["tab"] == step_view.tab
    # ...and the question is the one that view answers, as the model answers it now.
    tally = ws.tally(started.code, started.secret)
    again = lessons.previous_token_head(st.session)
    assert (tally.options, tally.answer) == (again.options, again.answer)
    assert (str(again.layer), again.head) == (str(st.layer), st.head)
    # The teacher's panel says what asking did, and why.
    said = out["workshop_tally"]
    assert "put back" in said and "layer 5" in said and "head 3" in said and "Logit lens" in said


def test_asking_on_the_steps_own_view_changes_nothing_on_screen(ws):
    st = set_up(4, 0)
    started = ws.start(4)
    st.workshop = Leading(started.code, started.secret, 4)
    session = st.session
    out = workshop_events.on_ask(REQUEST, st)
    assert st.session is session and "kept" not in out and "put back" not in out["workshop_tally"]
    assert ws.tally(started.code, started.secret).answer == st.lesson.posed.answer


def test_a_step_whose_question_asks_to_step_is_asked_on_the_view_as_it_is(ws):
    """Lesson 3, step 1 asks the class to switch the cache off and step: its answer holds whatever
    they do, and asking leaves the teacher's experiment on screen."""
    st = set_up(3, 0)
    started = ws.start(3)
    st.workshop = Leading(started.code, started.secret, 3)
    st.session.step()
    tokens = list(st.session.token_ids)
    workshop_events.on_ask(REQUEST, st)
    assert st.session.token_ids == tokens and lesson_events.view_changes(st, st.lesson) == []


def test_a_view_that_cannot_be_put_back_asks_nothing_and_says_why(ws, monkeypatch):
    st = set_up(4, 0)
    started = ws.start(4)
    st.workshop = Leading(started.code, started.secret, 4)
    moved_on(st)

    def cannot(*args, **kwargs):
        raise lessons.InputError("smollm2-135m-instruct cannot be loaded here")

    monkeypatch.setattr(lesson_events.lifecycle, "apply_snapshot", cannot)
    warned = []
    monkeypatch.setattr("explorer.ui.tab.gr.Warning", warned.append)
    assert workshop_events.on_ask(REQUEST, st) == {"__type__": "update"}  # nothing changes on the page
    assert ws.tally(started.code, started.secret) is None  # nothing asked
    assert "Nothing was asked" in warned[0] and "cannot be loaded here" in warned[0]


def test_check_puts_the_steps_view_back_before_it_checks(monkeypatch):
    """A learner alone: an answer given on another view is not checked against the step's; the
    step's view comes back and they are asked to look again. Then Check checks."""
    st = set_up(4, 0)
    step_view, answer = current_snapshot(st), st.lesson.posed.answer
    moved_on(st)
    out = lesson_events.on_lesson_check(REQUEST, st, answer, {})
    assert "Right" not in out["lesson_feedback"] and "view is back" in out["lesson_feedback"]
    assert current_snapshot(st) == step_view and "lessons_done" not in out
    st.tab = "lens"  # another tab alone changes no answer: checked
    out = lesson_events.on_lesson_check(REQUEST, st, answer, {})
    assert out["lesson_feedback"].startswith("✓ **Right.**") and out["lessons_done"] == {"4": [0]}


def test_view_changes_name_what_moved():
    st = set_up(4, 2)  # the step that switches three heads off
    at = st.lesson
    assert lesson_events.view_changes(st, at) == []
    st.switched_off = type(st.switched_off)()
    st.query = 3
    changed = lesson_events.view_changes(st, at)
    assert changed == ["other heads switched off"]  # the selected token matters to no question of this step


# ---------------------------------------------------------------- 2. what covers the next token
def test_a_learner_alone_has_the_next_token_covered_until_they_check():
    st = set_up(1, 0)
    cover = json.loads(answer_cover.lesson_cover(st))
    tokens = len(st.session.token_ids)
    assert cover == {"why": answer_cover.UNTIL_CHECKED, "ends": [lesson_title(1, 0)], "tokens": tokens}
    wrong = next(o for o in st.lesson.posed.options if o != st.lesson.posed.answer)
    out = lesson_events.on_lesson_check(REQUEST, st, wrong, {})
    assert out["answer_cover"] == "" and "Not quite" in out["lesson_feedback"]
    assert answer_cover.lesson_cover(set_up(1, 1)) == ""  # a question that does not ask for the next token


def test_the_teachers_page_is_covered_until_the_question_is_revealed(ws):
    st = set_up(1, 0)
    started = ws.start(1)
    st.workshop = Leading(started.code, started.secret, 1)
    assert json.loads(answer_cover.teacher_cover(st, None))["why"] == answer_cover.UNTIL_REVEALED  # before asking
    # The teacher's own Check is refused in a workshop (it put the answer on the projector while the
    # class voted): nothing changes, the page stays covered.
    assert lesson_events.on_lesson_check(REQUEST, st, st.lesson.posed.answer, {}) == gr.skip()
    assert workshop_events.panel(st)["lesson_check"].visible is False
    assert json.loads(answer_cover.teacher_cover(st, None))["why"] == answer_cover.UNTIL_REVEALED
    workshop_events.on_ask(REQUEST, st)
    asked = ws.tally(started.code, started.secret)
    assert asked.kind == "lesson-next" and json.loads(answer_cover.teacher_cover(st, asked))["why"]
    ws.reveal(started.code, started.secret)
    assert answer_cover.teacher_cover(st, ws.tally(started.code, started.secret)) == ""
    # "What token comes next?" at any step: covered from the question to its reveal.
    st.session.step()
    ws.pose(started.code, started.secret, next_token_question(st.session))
    cover = json.loads(answer_cover.teacher_cover(st, ws.tally(started.code, started.secret)))
    assert cover == {"why": answer_cover.UNTIL_REVEALED, "ends": [], "tokens": None}
    ws.reveal(started.code, started.secret)
    assert answer_cover.teacher_cover(st, ws.tally(started.code, started.secret)) == ""


def test_revealing_what_comes_next_on_a_lessons_step_uncovers_it_too(ws):
    """A teacher on a step that asks for the next token who asks "what token comes next?" instead
    of the step's own question: its reveal names the same token, so it ends the step's cover (it
    stayed covered on every page: a fresh-eyes session's class)."""
    st = set_up(1, 0)
    started = ws.start(1)
    st.workshop = Leading(started.code, started.secret, 1)
    ws.pose(started.code, started.secret, next_token_question(st.session))
    assert json.loads(answer_cover.teacher_cover(st, ws.tally(started.code, started.secret)))["why"]
    ws.reveal(started.code, started.secret)
    revealed = ws.tally(started.code, started.secret)
    assert answer_cover.teacher_cover(st, revealed) == ""
    session, tokens = workshop_events.kept_value(st), len(st.session.token_ids)
    assert revealed.title in json.loads(answer_cover.student_cover([1, 0], session, tokens))["ends"]
    st.session.step()  # the same question one token on names another token: the step's cover stays
    ws.pose(started.code, started.secret, next_token_question(st.session))
    ws.reveal(started.code, started.secret)
    st.session.undo()
    assert json.loads(answer_cover.teacher_cover(st, ws.tally(started.code, started.secret)))["why"]


def test_a_step_revealed_to_the_class_stays_shown_after_the_workshop_ends(ws):
    """The teacher's page after "End it": the step's answer, revealed to the class, is not covered
    again "until you check" (a fresh-eyes teacher saw it hidden once more); unrevealed, it is."""
    for revealed in (True, False):
        st = set_up(1, 0)
        started = ws.start(1)
        st.workshop = Leading(started.code, started.secret, 1)
        workshop_events.on_ask(REQUEST, st)
        if revealed:
            workshop_events.on_reveal(st)
        cover = workshop_events.ended(st)["answer_cover"]
        assert cover == ("" if revealed else answer_cover.covered(answer_cover.UNTIL_CHECKED, [lesson_title(1, 0)],
                                                                  len(st.session.token_ids)))  # fmt: skip


def test_a_student_is_covered_on_the_teachers_step_and_by_an_open_question(ws):
    st = set_up(1, 0)
    session = workshop_events.kept_value(st)
    tokens = len(st.session.token_ids)
    cover = json.loads(answer_cover.student_cover([1, 0], session, tokens))
    ends = [lesson_title(1, 0), NEXT_TOKEN_TITLE.format(tokens)]  # its own question, or the next token at its tokens
    assert cover == {"why": answer_cover.UNTIL_REVEALED, "ends": ends, "tokens": tokens}
    stepped = {**session, "generated": [*session["generated"], 42]}
    assert answer_cover.student_cover([1, 0], stepped, tokens + 1) == ""  # the teacher stepped: Step showed it
    for at in ([1, 1], None, [1], [99, 0], ["1", "0"], [True, 0]):  # another step, or what no step is
        assert answer_cover.student_cover(at, session, tokens) == ""
    # The question itself says to cover while it is open: the page's script reads it.
    started = ws.start(1)
    seat = ws.join(started.code, "", "a")
    ws.pose(started.code, started.secret, lesson_question(1, 0, st.lesson.posed))
    shown = workshop_round.round_view(ws.student_round(seat))
    assert shown["covers"] == answer_cover.UNTIL_REVEALED and shown["title"] == lesson_title(1, 0)
    ws.reveal(started.code, started.secret)
    assert workshop_round.round_view(ws.student_round(seat))["covers"] == ""
    ws.pose(started.code, started.secret, lesson_question(4, 0, set_up(4, 0).lesson.posed))
    assert workshop_round.round_view(ws.student_round(seat))["covers"] == ""  # a head's question: nothing


def test_the_teachers_chart_shows_the_models_probabilities_only_once_revealed(ws):
    st = set_up(1, 0)
    started = ws.start(1)
    ws.join(started.code, "", "a")
    ws.pose(started.code, started.secret, next_token_question(st.session))
    before = tally_figure(ws.tally(started.code, started.secret))
    assert [trace["name"] for trace in before["data"]] == ["the class"]
    title = before["layout"]["title"]["text"]
    assert "probabilities come with the reveal" in title
    lines = [re.sub("<[^>]+>", "", line) for line in title.split("<br>")]
    assert max(map(len, lines)) <= 60, lines  # the teacher's panel is ~460 px wide: one line was cut
    ws.reveal(started.code, started.secret)
    after = tally_figure(ws.tally(started.code, started.secret))
    assert [trace["name"] for trace in after["data"]] == ["the class", "the model's probability"]


def test_asking_again_is_about_the_same_view(ws, monkeypatch):
    """Ask again after the teacher moved on: a lesson step's question puts the step's view back
    first; another step's question, or "what token comes next?" after a Step, is not asked again."""
    st = set_up(4, 0)
    step_view = current_snapshot(st)
    started = ws.start(4)
    st.workshop = Leading(started.code, started.secret, 4)
    workshop_events.on_ask(REQUEST, st)
    ws.reveal(started.code, started.secret)
    moved_on(st)
    out = workshop_events.on_again(REQUEST, st)
    assert current_snapshot(st) == step_view and "put back" in out["workshop_tally"]
    assert ws.tally(started.code, started.secret).number == 2
    warned = []
    monkeypatch.setattr("explorer.ui.tab.gr.Warning", warned.append)
    st.session.step()
    ws.pose(started.code, started.secret, next_token_question(st.session))
    st.session.step()  # the class has seen the answer now
    assert workshop_events.on_again(REQUEST, st) == {"__type__": "update"}
    assert "Nothing was asked" in warned[-1] and ws.tally(started.code, started.secret).number == 3
    st.session.undo()  # back where it was asked: asked again
    workshop_events.on_again(REQUEST, st)
    assert ws.tally(started.code, started.secret).number == 4
    other = lesson_events.set_up(REQUEST, st, 4, 1, None)["state"]  # another step of the lesson
    ws.pose(started.code, started.secret, lesson_question(4, 0, lessons.previous_token_head(other.session)))
    assert workshop_events.on_again(REQUEST, other) == {"__type__": "update"}
    assert "Lesson 4, step 1" in warned[-1] and ws.tally(started.code, started.secret).number == 5


def test_the_teachers_panel_names_the_lesson_the_class_sees(ws):
    """A workshop started on lesson 1 whose teacher opened lesson 4: its panel said lesson 1."""
    started = ws.start(1)
    st = set_up(4, 1)
    st.workshop = Leading(started.code, started.secret, 1)
    assert f"**Workshop {started.code}** on lesson 4, *{lessons.LESSONS[3].title}*" in workshop_events.teacher_info(st)


# ---------------------------------------------------------------- what the panel offers with no lesson
CONTROLS = ("lesson_answer", "lesson_check", "lesson_next")


def shown(updates, names=CONTROLS) -> list[bool]:
    return [updates[name].visible for name in names]


def test_the_answer_check_and_next_come_only_with_a_lesson(ws):
    """ "Your answer", Check and Next step, with nothing to check: not before any lesson, not after
    a model switch closed it, not after a workshop ended on a page with no lesson open."""
    assert shown(lesson_events.lesson_controls(None)) == [False, False, False]
    out = lesson_events.set_up(REQUEST, None, 7, 0, None)
    st = out["state"]
    assert shown(out) == [True, True, True] and shown(workshop_events.panel(st)) == [True, True, True]
    started = ws.start(7)
    st.workshop = Leading(started.code, started.secret, 7)  # the teacher asks and reveals; Next stays theirs
    assert shown(workshop_events.panel(st)) == [False, False, True]
    assert shown(lifecycle.closed_lesson(st)) == [False, False, False]  # (a model switch)
    st.workshop = None  # the workshop is over, and no lesson is open
    assert shown(workshop_events.panel(st)) == [False, False, False]


def test_a_lesson_on_a_base_model_offers_no_chat_template():
    """Lesson 10 opens Gemma 3 270M, a base model: no "Use the chat template", and the model's
    line says why; a lesson on SmolLM2 (instruction-tuned) offers it."""
    gemma = lesson_events.set_up(REQUEST, None, 10, 0, None)
    assert gemma["chat"].visible is False and "no chat template" in gemma["model_info"]
    smol = lesson_events.set_up(REQUEST, None, 7, 0, None)
    assert smol["chat"].visible is True and "no chat template" not in smol["model_info"]


def test_start_a_workshop_is_offered_once_a_lesson_is_chosen():
    def start(lesson):
        button = workshop_events.start_button(lesson)["workshop_start"]
        return button.value, button.interactive

    assert start(3) == ("Start a workshop on lesson 3", True)
    for nothing in (None, "3", True, [3]):  # no lesson, or what the list never holds
        assert start(nothing) == (workshop_events.START_WITHOUT_LESSON, False)


# ---------------------------------------------------------------- the end of the lessons
def test_next_on_the_last_step_of_the_last_lesson_says_so_and_changes_nothing():
    """(In the browser only lessons that open every view run end to end: test_lessons_ui.py.)"""
    st = set_up(1, 0)
    last = lessons.LESSONS[-1]
    st.lesson = dataclasses.replace(st.lesson, number=last.number, index=len(last.steps) - 1)
    tokens = st.session.token_ids
    out = lesson_events.on_lesson_next(REQUEST, st, {})
    assert out == {"lesson_feedback": "That was the last step of the last lesson. Well done!"}
    assert st.session.token_ids == tokens and st.lesson.number == last.number
