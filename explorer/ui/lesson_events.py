"""The Lessons panel: choose a lesson, and each step sets up the model, the text and the view,
asks its question and checks the answer against what the live model computed (``explorer.lessons``).

A step can be linked to (``?lesson=3&step=2``, steps counted from 1); what a browser has answered
right is kept in its localStorage (``lessons_done``: {"3": [0, 1]}), and a lesson whose every
step was answered is ticked in the list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import gradio as gr

from explorer import lessons
from explorer.analysis import snapshot
from explorer.analysis.ablation import SwitchedOff
from explorer.errors import InputError, as_sentence
from explorer.present import model_store
from explorer.present.lesson_at import LessonAt
from explorer.present.tabs import tab_named
from explorer.present.views import MEAN, ExplorerState
from explorer.present.workshop_seats import Following, in_class
from explorer.ui import answer_cover, lifecycle
from explorer.ui.lifecycle import closed_lesson, show_session
from explorer.ui.render import SETTINGS, render
from explorer.ui.shown import Updates, current_snapshot
from explorer.ui.tab import USER_ERRORS, tab_event

# What a lesson step changes besides the session on screen.
LESSON_VIEWS = (
    "lesson", "lesson_text", "lesson_answer", "lesson_feedback", "lessons_panel", "switched_off", "lesson_back",
    "answer_cover", "lesson_check", "lesson_next",
)  # fmt: skip


def lesson_controls(st: ExplorerState | None, options: list[str] | None = None) -> Updates:
    """Show "Your answer", Check and Next step only with a lesson open: without one there is
    nothing to answer or check (before any lesson, after a model switch closed it, after a
    workshop). In a workshop the teacher asks and reveals: the answer and Check are away on every
    page, the teacher's too (its Check put the answer on the projector while the class voted).
    ``options``: a new step's answers to choose from (none chosen yet)."""
    lesson_open = st is not None and st.lesson is not None
    answers_here = lesson_open and not in_class(st)
    answer = {} if options is None else {"choices": options, "value": None}
    return {
        "lesson_answer": gr.Radio(visible=answers_here, **answer),
        "lesson_check": gr.Button(visible=answers_here),
        "lesson_next": gr.Button(visible=lesson_open),
    }


def lesson_choices(done: Mapping | None) -> list[tuple[str, int]]:
    """The list of lessons, each ticked once all its steps were answered right in this browser."""
    done = done or {}
    choices = []
    for lesson in lessons.LESSONS:
        complete = len(set(done.get(str(lesson.number), []))) >= len(lesson.steps)
        choices.append((f"{lesson.number}. {lesson.title}" + (" ✓" if complete else ""), lesson.number))
    return choices


def step_heading(number: int, index: int) -> str:
    """ "**Lesson 3, step 2 of 3: its title**" (raises InputError for a step that does not exist)."""
    step, count = lessons.step_of(number, index), len(lessons.lesson(number).steps)
    return f"**Lesson {number}, step {index + 1} of {count}: {step.title}**"


def step_text(number: int, index: int) -> str:
    step = lessons.step_of(number, index)
    return (
        f"{step_heading(number, index)}\n\n{step.text}\n\n"
        f"**{step.question}**\n\n[A link to this step](?lesson={number}&step={index + 1})"
    )


def set_up(
    request: gr.Request, st: ExplorerState | None, number: int, index: int, done,
    before: snapshot.Snapshot | None = None,
) -> Updates:  # fmt: skip
    """Put lesson ``number``'s step ``index`` (from 0) on screen: its session, view and question
    (``done``: what this browser answered, to tick the list; None leaves its ticks as they are;
    ``before``: the user's work to go back to, when it is not the tab's session, as at a page load)."""
    step = lessons.step_of(number, index)
    name = step.setup.model
    session = lessons.posed_session(model_store.get_model(name), step.setup)
    posed = step.pose(session)
    layer = posed.layer if posed.layer is not None else step.setup.layer
    head = posed.head if posed.head is not None else step.setup.head
    view = snapshot.snapshot_of(name, session, layer=layer, head=head, query=posed.query, tab=step.setup.tab)
    before = kept_work(st) or before
    out = show_session(request, st, name, session, view)
    st = out["state"]
    shown = current_snapshot(st)
    st.lesson = LessonAt(number, index, posed, name, session, len(session.token_ids), before, shown)
    switched_off = SwitchedOff(posed.switched_off)  # each step sets up the whole view: none but its own
    if switched_off != st.switched_off:
        st.switched_off = switched_off
        out |= render(st)  # the views again, with what the step switched off crossed out
    return {
        **out,
        **lesson_controls(st, posed.options),
        "lesson": gr.Dropdown(value=number, **({} if done is None else {"choices": lesson_choices(done)})),
        "lesson_text": step_text(number, index),
        "lesson_feedback": "",
        "lessons_panel": gr.Accordion(open=True),
        "switched_off": st.switched_off.text(),
        "lesson_back": gr.Button(visible=before is not None),
        "answer_cover": answer_cover.lesson_cover(st),
    }


# ---------------------------------------------------------------- the step's own view
def view_changes(st: ExplorerState, at: LessonAt, with_tab: bool = True) -> list[str]:
    """What of the step's own view the screen no longer shows, in words ([]: it shows it all).
    A step whose question asks the learner to change the view (``hands_on``) has none.
    ``with_tab=False``: the open tab does not count (another tab shows the same model, text,
    layer and head: it changes no question's answer, only where the learner looks)."""
    if lessons.step_of(at.number, at.index).hands_on or at.shown is None:
        return []
    now, then = current_snapshot(st), at.shown
    changes = []
    settings = ("model", "text", "chat", "use_cache", "temperature", "top_k", "top_p", "seed", "cache_policy")
    if any(getattr(now, name) != getattr(then, name) for name in settings):
        changes.append("the text or its settings")
    elif (now.generated, now.forced) != (then.generated, then.forced):
        changes.append(f"{generated_words(now)}, not the step's {len(then.generated)}")
    if now.layer != then.layer:
        changes.append(f"layer {now.layer}, not the step's {then.layer}")
    if now.head != then.head:
        changes.append(f"{head_words(now.head)}, not the step's {head_words(then.head)}")
    if with_tab and now.tab != then.tab:
        changes.append(f"the {tab_named(now.tab).title} tab, not the step's {tab_named(then.tab).title}")
    if at.posed.query is not None and now.query != then.query:
        changes.append("another selected token")
    if st.switched_off != SwitchedOff(at.posed.switched_off):
        changes.append("other heads switched off")
    return changes


def generated_words(view: snapshot.Snapshot) -> str:
    n = len(view.generated)
    return f"{n} generated token{'' if n == 1 else 's'}" + (" (some chosen by hand)" if view.forced else "")


def head_words(head: str) -> str:
    return "the average of the heads" if head == MEAN else f"head {head}"


def back_to_step(request: gr.Request, st: ExplorerState, at: LessonAt) -> Updates:
    """The step's own view on screen again, as the step set it up: its tokens replayed (the
    posed question's numbers are those of this session), its layer, head, tab, and the heads it
    switched off. On an error (a model that cannot load) nothing changes."""
    out, _ = lifecycle.apply_snapshot(request, st, at.shown)
    st = out["state"]
    st.lesson = dataclasses.replace(at, session=st.session, set_up_tokens=len(st.session.token_ids))
    switched_off = SwitchedOff(at.posed.switched_off)
    if switched_off != st.switched_off:
        st.switched_off = switched_off
        out |= render(st)
    return {**out, "switched_off": st.switched_off.text()}


def kept_work(st: ExplorerState | None) -> snapshot.Snapshot | None:
    """The session a lesson step is about to replace, when it is the user's own work: not a
    lesson step's session as the step set it up (that one the lesson can set up again)."""
    if st is None or st.session is None:
        return None
    at = st.lesson
    if at is not None and st.session is at.session and len(st.session.token_ids) == at.set_up_tokens:
        return at.before  # still the lesson's own session as set up: what it replaced stays what to go back to
    return current_snapshot(st)


@tab_event
def on_lesson(request: gr.Request, number, st, done, progress=gr.Progress()):
    """A lesson chosen in the list. The list also sends its value when it loses focus (a Tab
    through the panel): a lesson already on screen is then left as it is, and so is the user's work."""
    if number is None or (st is not None and st.lesson is not None and st.lesson.number == int(number)):
        return gr.skip()
    progress(0, desc=f"Setting up lesson {number}")
    return set_up(request, st, int(number), 0, done)


@tab_event
def on_lesson_back(request: gr.Request, st, progress=gr.Progress()):
    """Back to the session the lesson replaced, as it was (its tokens replayed), and the lesson closed."""
    at = current_step(st)
    if at.before is None:
        raise InputError("There is no text of yours to go back to: the lesson replaced none.")
    progress(0, desc=f"Bringing back your text on {at.before.model}")
    out, _ = lifecycle.apply_snapshot(request, st, at.before)
    return {**out, **closed_lesson(st)}


@tab_event
def on_lesson_next(request: gr.Request, st, done, progress=gr.Progress()):
    at = current_step(st)
    steps = len(lessons.lesson(at.number).steps)
    number, index = (at.number, at.index + 1) if at.index + 1 < steps else (at.number + 1, 0)
    if number > len(lessons.LESSONS):
        return {"lesson_feedback": "That was the last step of the last lesson. Well done!"}
    progress(0, desc=f"Setting up lesson {number}, step {index + 1}")
    return set_up(request, st, number, index, done)


@tab_event
def on_lesson_check(request: gr.Request, st, choice, done):
    """Check a learner's answer against the step's question. The question is about the step's own
    view: when the screen shows another (they stepped, chose another head...), that view comes
    back first and they are asked to look again; nothing is checked."""
    at = current_step(st)
    if in_class(st):
        raise InputError(
            "In a workshop, answer in the Workshop panel: your teacher reveals the answer."
            if isinstance(st.workshop, Following)
            else "In a workshop the class answers: press **Ask this step's question**, then **Reveal the answer**."
        )
    if not choice:
        raise InputError("Choose an answer first, then press Check.")
    changes = view_changes(st, at, with_tab=False)
    if changes:
        out = back_to_step(request, st, at)
        return {**out, "lesson_feedback": (
            f"This question is about the step's own view, and the screen had changed ({'; '.join(changes)}). "
            "The step's view is back: look at it again, then press **Check**."
        )}  # fmt: skip
    st.lesson = at = dataclasses.replace(at, checked=True)
    cover = {"answer_cover": answer_cover.lesson_cover(st)}
    if choice != at.posed.answer:
        return {**cover, "lesson_feedback": "✗ **Not quite.** Look at the view again, and try another answer."}
    done = {key: list(value) for key, value in (done or {}).items()}
    answered = sorted({*done.get(str(at.number), []), at.index})
    done[str(at.number)] = answered
    return {
        **cover,
        "lesson_feedback": f"✓ **Right.** {at.posed.why}",
        "lessons_done": done,
        "lesson": gr.Dropdown(choices=lesson_choices(done), value=at.number),
    }


def current_step(st: ExplorerState | None) -> LessonAt:
    at = st.lesson if st is not None else None
    if at is None:
        raise InputError("Choose a lesson first (the Lessons list).")
    if st.model_name != at.model_name:  # (a model switch closes the lesson; this is the guard)
        raise InputError(f"This lesson step is about {at.model_name}: choose the lesson again to go on.")
    return at


def opens(request: gr.Request, inputs: tuple, progress: gr.Progress) -> Updates | None:
    """The page's first load opened at a lesson link's step (``?lesson=3&step=2``); None without
    one, or for one that cannot be opened (said; the page then opens as it does without one,
    ``lifecycle.page_load``).

    A lesson link opened in a tab with the user's own work (the session this tab kept) keeps that
    work: "Back to your text" brings it back, and the tab's kept copy is left as it was, so that
    the browser's Back (a load without the link) and a reload bring it back too."""
    try:
        linked = linked_step(request.query_params)
        if linked is not None:
            progress(0, desc=f"Setting up lesson {linked[0]}, step {linked[1] + 1}")
            out = set_up(request, None, *linked, done=None, before=own_work(kept_of(inputs)))
            out.pop("kept", None)
            return out
    except USER_ERRORS as error:
        gr.Warning(f"This lesson link cannot be opened: {as_sentence(error)} The explorer opens as usual.")
    return None


def kept_of(inputs: tuple):
    """The kept session among the page load's inputs (after the model's name): after the settings,
    where an API caller may leave it out."""
    return inputs[len(SETTINGS)] if len(inputs) > len(SETTINGS) else None


def own_work(kept_session) -> snapshot.Snapshot | None:
    """The session this tab kept, if it can be restored; None for none, or for one that cannot
    (``lifecycle.first_load`` says why when it is asked to restore it)."""
    if kept_session is None:
        return None
    try:
        return snapshot.checked_snapshot(kept_session)
    except USER_ERRORS:
        return None


def on_progress(done) -> Updates:
    """The lessons this browser finished, ticked in the list (a load event of its own)."""
    return {"lesson": gr.Dropdown(choices=lesson_choices(done))}


def linked_step(params: Mapping[str, str]) -> tuple[int, int] | None:
    """(lesson, step index from 0) of a link's ``?lesson=3&step=2``, or None without one."""
    if "lesson" not in params:
        return None
    try:
        number, index = int(params["lesson"]), int(params.get("step", 1)) - 1
    except ValueError as error:
        raise InputError("a lesson link names a lesson and a step by number, e.g. ?lesson=3&step=2") from error
    lessons.step_of(number, index)  # both exist
    return number, index
