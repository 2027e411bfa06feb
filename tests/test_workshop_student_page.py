"""A student's page in a workshop, on the server (issue 40, items 5 and 6): the words a student
reads, the lesson's own Check put away while the teacher asks, and the panel that says at once
that a student who moved the view themselves explores on their own. What a person sees of it:
tests/browser/test_workshop_phone.py."""

from __future__ import annotations

import pytest

import explorer
from explorer.workshop import Limits, Workshops, connect

NUMBER_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]


@pytest.fixture
def page_store(tmp_path, monkeypatch):
    from explorer.ui import workshop_events

    engine = connect(f"sqlite:///{tmp_path / 'workshops.sqlite3'}")
    ws = Workshops(engine, Limits())
    monkeypatch.setattr(workshop_events, "_store", ws)
    yield ws
    engine.dispose()


def tab_with_session(checkpoints, seat=None):
    from explorer.present.views import ExplorerState

    st = ExplorerState("tiny-llama")
    st.session = explorer.GenerationSession(explorer.load_model(str(checkpoints["llama"])), "one two three")
    st.workshop = seat
    return st


def test_the_lessons_panel_counts_the_lessons_it_lists():
    from explorer.lessons import LESSONS
    from explorer.ui import texts

    assert texts.LESSONS.split()[0].lower() == NUMBER_WORDS[len(LESSONS) - 1]
    assert texts.LESSONS.split()[1:3] == ["short", "lessons"]


def test_a_students_result_names_the_models_probabilities_not_a_chart_they_do_not_have(checkpoints):
    """The why of "what token comes next?" is read by each student after the reveal: only the
    teacher's panel has a chart."""
    from explorer.tokens import visible
    from explorer.workshop.questions import next_token_question

    session = explorer.GenerationSession(explorer.load_model(str(checkpoints["llama"])), "one two three")
    question = next_token_question(session)
    why = question.why
    assert "chart" not in why.lower()
    # Words a class reads: how long the text is (not "(token 3)"), and true at any temperature.
    assert "(token" not in question.question and f"{len(session.token_ids)} tokens so far" in question.question
    assert "sampling may draw another" in why
    for candidate in session.top_candidates(3):
        assert f"{visible(candidate.text)!r} {candidate.probability:.1%}" in why


def test_a_students_panel_puts_the_lessons_check_away_and_makes_a_students_page(page_store, checkpoints):
    from explorer.present.workshop_seats import Following
    from explorer.ui import workshop_events

    started = page_store.start(1)
    st = tab_with_session(checkpoints, Following(page_store.join(started.code, "", "a")))
    shown = workshop_events.panel(st)
    assert shown["lesson_answer"].visible is False and shown["lesson_check"].visible is False
    assert shown["workshop_focus"] is True  # following: the question and the teacher's view, little else
    st.workshop.following = False
    assert workshop_events.panel(st)["workshop_focus"] is False  # exploring: the whole explorer
    st.workshop = None
    alone = workshop_events.panel(st)  # out of the workshop with no lesson open: nothing to answer or check
    assert alone["lesson_answer"].visible is False and alone["lesson_check"].visible is False
    assert alone["lesson_next"].visible is False  # (with a lesson open they come back: test_lesson_questions)
    assert alone["workshop_focus"] is False


def test_a_student_who_steps_on_their_own_is_told_at_once(page_store, checkpoints):
    """After a student's own Step (``after_event`` stops their following), the page presses the
    hidden button of ``on_own_move``: the panel says so without waiting for the teacher's next move."""
    from explorer.present.workshop_seats import Following
    from explorer.ui import workshop_events
    from explorer.ui.panels.workshop import after_event
    from explorer.ui.shown import kept_value

    started = page_store.start(1)
    st = tab_with_session(checkpoints, Following(page_store.join(started.code, "Ada", "a")))
    st.workshop.applied = workshop_events.as_json(kept_value(st))
    assert workshop_events.on_own_move(st) == {"__type__": "update"}  # still following: nothing to say
    st.session.step()
    after_event((st,), {"kept": kept_value(st)})
    said = workshop_events.on_own_move(st)
    assert "exploring on your own" in said["workshop_info"] and said["workshop_follow"] is False
    assert said["workshop_seat"]["following"] is False and said["workshop_focus"] is False
