"""The Workshop panel's components: the panel itself (inside the Lessons panel, the place it opens
for it), and what the page keeps in the browser and its scripts read and press (never shown)."""

from __future__ import annotations

import gradio as gr

from explorer.ui import texts
from explorer.ui.page import Page
from explorer.ui.workshop_events import START_WITHOUT_LESSON

WORKSHOP_KEY = "decoder-explorer-workshop"  # this browser's seat in a workshop (explorer.present.workshop_seats)
MINE_KEY = "decoder-explorer-workshops-started"  # the workshops this browser started, to lead or end again


def layout(page: Page, place: str) -> None:
    if place == "hidden":
        secret = page.browser_secret
        page.add(
            workshop_seat=gr.BrowserState(None, storage_key=WORKSHOP_KEY, secret=secret),
            workshop_mine=gr.BrowserState([], storage_key=MINE_KEY, secret=secret),
        )
        page.add(**workshop_machinery())
    else:  # "lessons": a workshop runs a lesson with a class; folded inside Lessons, it costs the
        # projector's first screen nothing (tests/browser/test_projector.py)
        page.add(**workshop_panel())


def workshop_panel() -> dict:
    """A workshop (explorer.ui.workshop_events), inside the Lessons panel: start one on the lesson
    chosen above, or join one;
    then the teacher's controls and the class's answers, or a student's question."""
    made = {}
    with gr.Accordion("Workshop", open=False, elem_id="workshop") as made["workshop_panel"]:
        made["workshop_info"] = gr.Markdown(texts.WORKSHOP, elem_id="workshop-info")
        with gr.Column(elem_id="workshop-enter") as made["workshop_enter"]:
            with gr.Row():
                made["workshop_code"] = gr.Textbox(
                    label="Room code", max_length=40, placeholder="K7PQ2M", elem_id="workshop-code", min_width=120
                )
                made["workshop_name"] = gr.Textbox(
                    label="Your name (optional)", max_length=32, elem_id="workshop-name", min_width=160
                )
            with gr.Row():
                made["workshop_join"] = gr.Button("Join", variant="primary", size="sm", elem_id="workshop-join")
                # Offered once a lesson is chosen: the workshop runs it (workshop_events.start_button).
                made["workshop_start"] = gr.Button(
                    START_WITHOUT_LESSON, size="sm", elem_id="workshop-start", interactive=False
                )
            # Start refused (the server's or this network's limit): said here, beside the button, until
            # the next try; the toast alone faded, far from the button (workshop_events.on_start).
            made["workshop_start_note"] = gr.Markdown("", elem_id="workshop-start-note")
            # The workshops this browser started that still run: open one to lead it, or to end it.
            with gr.Row(equal_height=False, visible=False, elem_id="workshop-mine") as made["workshop_mine_row"]:
                made["workshop_mine_pick"] = gr.Dropdown(
                    label="Workshops you started in this browser", choices=[], elem_id="workshop-mine-pick",
                    min_width=160,
                )  # fmt: skip
                made["workshop_mine_open"] = gr.Button("Lead it again", size="sm", elem_id="workshop-mine-open")
        with gr.Column(visible=False, elem_id="workshop-teacher") as made["workshop_teacher"]:
            made |= teacher_controls()
        with gr.Column(visible=False, elem_id="workshop-student") as made["workshop_student"]:
            made |= student_controls()
    return made


def teacher_controls() -> dict:
    made = {
        # The room code, large enough to read from the back of the room on a projector (page.css).
        "workshop_room": gr.HTML(elem_id="workshop-room", apply_default_css=False),
        "workshop_student_link": gr.Textbox(
            label="Student link", interactive=False, buttons=["copy"], elem_id="workshop-student-link"
        ),
    }
    # The teacher's page is on the projector: the link that lets its holder lead stays folded.
    with gr.Accordion("Your teacher link (keep it off the projector)", open=False, elem_id="workshop-teacher-fold"):
        made["workshop_teacher_link"] = gr.Textbox(
            label="Teacher link: whoever opens it leads this workshop", interactive=False, buttons=["copy"],
            elem_id="workshop-teacher-link",
        )  # fmt: skip
    with gr.Row():
        made["workshop_ask"] = gr.Button(
            "Ask this step's question", variant="primary", size="sm", elem_id="workshop-ask"
        )
        made["workshop_ask_next"] = gr.Button("Ask: what token comes next?", size="sm", elem_id="workshop-ask-next")
    with gr.Row():
        made["workshop_reveal"] = gr.Button("Reveal the answer", size="sm", elem_id="workshop-reveal")
        made["workshop_again"] = gr.Button("Ask again", size="sm", elem_id="workshop-again")
    made["workshop_tally"] = gr.Markdown(elem_id="workshop-tally")
    made["workshop_chart"] = gr.Plot(show_label=False, elem_id="workshop-chart")
    with gr.Row():
        made["workshop_csv_button"] = gr.Button("Download the answers (CSV)", size="sm", elem_id="workshop-csv-button")
        made["workshop_end"] = gr.Button("End the workshop", variant="stop", size="sm", elem_id="workshop-end")
    # Ending deletes every answer: asked once more, with the download beside it (one click lost a lesson's answers).
    with gr.Column(visible=False, elem_id="workshop-end-confirm") as made["workshop_end_confirm"]:
        gr.Markdown(
            "**End the workshop?** It is deleted with every answer, and the students' pages are told it "
            "ended. Download the answers first if you want them."
        )
        with gr.Row():
            made["workshop_end_yes"] = gr.Button(
                "End it and delete the answers", variant="stop", size="sm", elem_id="workshop-end-yes"
            )
            made["workshop_end_no"] = gr.Button("Keep the workshop", size="sm", elem_id="workshop-end-no")
    # The download's link (a ticket used once): the page's script opens it at once (one click).
    made["workshop_csv_link"] = gr.Textbox(
        label="The answers' download (read by the page's script)", elem_id="workshop-csv-link",
        elem_classes="machine-only",
    )  # fmt: skip
    # Who is in the class: closed to new students, the seats one network holds, a seat removed.
    with gr.Row(equal_height=True):
        made["workshop_lock"] = gr.Checkbox(label="Closed to new students", elem_id="workshop-lock")
        made["workshop_seats"] = gr.Number(
            label="Seats from one network", info="a class behind one school router: raise it, then Enter",
            precision=0, minimum=1, maximum=1000, elem_id="workshop-seats", min_width=160,
        )  # fmt: skip
    with gr.Row(equal_height=False):
        made["workshop_remove_pick"] = gr.Dropdown(
            label="Remove a student", choices=[], elem_id="workshop-remove-pick", min_width=160
        )
        made["workshop_remove"] = gr.Button("Remove", size="sm", elem_id="workshop-remove")
    return made


def student_controls() -> dict:
    """The question first (a student's page shows little else while they follow), then following."""
    made = {}
    # The question, the choices, Send and the result: drawn by the page's script from two small
    # requests, not Gradio events (explorer.ui.workshop_round; static/workshop.js).
    made["workshop_round"] = gr.HTML(
        '<div class="workshop-round-body"><p>The teacher\'s question appears here.</p></div>',
        elem_id="workshop-round",
        apply_default_css=False,
    )
    with gr.Row():
        made["workshop_follow"] = gr.Checkbox(label="Follow the teacher", value=True, elem_id="workshop-follow")
        made["workshop_back"] = gr.Button("Back to where the teacher is", size="sm", elem_id="workshop-back")
    made["workshop_leave"] = gr.Button("Leave the workshop", size="sm", elem_id="workshop-leave")
    return made


def workshop_machinery() -> dict:
    """What the page's script reads and clicks (static/workshop.js): the seat's
    code and part, and the button it presses when the workshop changed. Never shown."""
    return {
        "workshop_live": gr.Textbox(
            label="Workshop (read by the page's script)", elem_id="workshop-live", elem_classes="machine-only"
        ),
        # A teacher link's secret, taken out of the address by TEACHER_LINK_SCRIPT (its wiring) for the load event
        # (a request's body, never its URL), emptied by it.
        "workshop_link": gr.Textbox(
            label="Teacher link (read by the page's script)", elem_id="workshop-link", elem_classes="machine-only"
        ),
        # (Beside the boxes above: one form container for all, no gap of its own on the page.)
        # Ticked on a student's page (a student link, or joined and following): the page's style
        # then shows the workshop first and folds the explorer's other controls away (page.css).
        "workshop_focus": gr.Checkbox(
            label="A student's page (read by the page's style)",
            value=False,
            elem_id="workshop-focus",
            elem_classes="machine-only",
        ),
        "workshop_sync": gr.Button("Sync the workshop", elem_id="workshop-sync", elem_classes="machine-only"),
        "workshop_follow_sync": gr.Button(
            "Take the teacher's view", elem_id="workshop-follow-sync", elem_classes="machine-only"
        ),
        # Pressed by the page's script for the intro's "Join or run a workshop" link (it opens the panels).
        "workshop_open": gr.Button("Open the Workshop panel", elem_id="workshop-open", elem_classes="machine-only"),
        # Pressed by the page's script after a following student moved the view themselves: their
        # panel says at once that they explore on their own.
        "workshop_own_move": gr.Button(
            "Say that I explore on my own", elem_id="workshop-own-move", elem_classes="machine-only"
        ),
    }
