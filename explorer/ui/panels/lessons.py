"""The Lessons panel as a feature: guided lessons on the live model (``explorer.lessons``), closed
until a lesson is chosen or linked to. Its layout (the panel, at the top of the left column, with
a place inside it for the panels that run a lesson: the Workshop), its events (the callbacks are
``explorer.ui.lesson_events``), its opening of the page at a lesson link's step, its slice of the
state (``ExplorerState.lesson``), and what this browser has answered (kept in the browser)."""

from __future__ import annotations

import json

import gradio as gr

from explorer.lessons import LESSONS as LESSON_LIST
from explorer.ui import answer_cover, lesson_events, texts
from explorer.ui.feature import Feature
from explorer.ui.lesson_events import LESSON_VIEWS
from explorer.ui.page import Page
from explorer.ui.static_files import static
from explorer.ui.wiring import Wiring, on

LESSONS_KEY = "decoder-explorer-lessons"  # which lesson steps this browser has answered
SHOW_FEEDBACK = static("show_feedback.js")  # after Check: the lesson's feedback scrolled into sight
# While a question asks which token comes next, the views that would name it are covered (its
# client code; what it covers and when, explorer.ui.answer_cover).
COVER_SCRIPT = static("answer_cover.js").replace("__COVERED__", json.dumps(answer_cover.COVERED))
# A teacher leading a workshop: the next step's view is what the class looks at, so the projector
# goes back to the top (the token strip and the candidates). The Lessons panel follows them while
# a teacher leads (workshop.css): Next step left the page on the lesson's text, the class's view
# off screen (fresh eyes). A page without a workshop stays where it is.
SHOW_CLASS_VIEW = """() => { if (document.querySelector('#workshop-teacher'))
    window.scrollTo({top: 0, behavior: 'instant'}); }"""


def layout(page: Page, place: str) -> None:
    if place == "hidden":
        page.add(lessons_done=gr.BrowserState({}, storage_key=LESSONS_KEY, secret=page.browser_secret))
    else:  # "workbench"
        panel(page)


def panel(page: Page) -> None:
    """The lesson list, the step's text and question, Check, Next and Back; then the panels placed
    inside it ("lessons")."""
    made = {}
    with gr.Accordion("Lessons", open=False, elem_id="lessons") as made["lessons_panel"]:
        made["lesson"] = gr.Dropdown(
            choices=[(f"{lesson.number}. {lesson.title}", lesson.number) for lesson in LESSON_LIST], value=None,
            label="Lesson", elem_id="lesson",
        )  # fmt: skip
        made["lesson_text"] = gr.Markdown(texts.LESSONS, elem_id="lesson-text")
        # The answer, Check and Next come with a lesson (lesson_events.lesson_controls).
        made["lesson_answer"] = gr.Radio([], label="Your answer", elem_id="lesson-answer", visible=False)
        with gr.Row():
            made["lesson_check"] = gr.Button(
                "Check", variant="primary", elem_id="lesson-check", size="sm", visible=False
            )
            made["lesson_next"] = gr.Button("Next step", elem_id="lesson-next", size="sm", visible=False)
            made["lesson_back"] = gr.Button("Back to your text", elem_id="lesson-back", size="sm", visible=False)
        made["lesson_feedback"] = gr.Markdown(elem_id="lesson-feedback")
        page.add(**made)
        page.lay_out("lessons")  # a workshop runs a lesson with a class


def wire(wiring: Wiring) -> None:
    """A lesson or the next step sets up everything on screen; Check answers. The lessons this
    browser finished are ticked in the list when the page loads (a load event of its own)."""
    page = wiring.page
    done, p = page.lessons_done, page.pick
    shown = {*wiring.restored, *p(*LESSON_VIEWS)}
    wiring.demo.load(on(page, lesson_events.on_progress), [done], [page.lesson], queue=False)
    page.lesson.input(on(page, lesson_events.on_lesson), [page.lesson, page.state, done], shown)
    page.lesson_next.click(on(page, lesson_events.on_lesson_next), [page.state, done], shown).then(
        None, js=SHOW_CLASS_VIEW
    )
    page.lesson_back.click(on(page, lesson_events.on_lesson_back), [page.state], shown)
    # Check may first put the step's own view back (the question is about it): every view.
    checked = {*shown, *p("lessons_done")}
    # The answer appears where the eye is: at 1280x720 the feedback sits below the fold.
    page.lesson_check.click(
        on(page, lesson_events.on_lesson_check), [page.state, page.lesson_answer, done], checked
    ).then(None, js=SHOW_FEEDBACK)


LESSONS = Feature(
    "lessons", layout=layout, wire=wire, state="lesson", places=("hidden", "workbench"),
    styles=("answer_cover.css",), scripts=(COVER_SCRIPT,), opens=lesson_events.opens, opens_views=LESSON_VIEWS,
)  # fmt: skip
