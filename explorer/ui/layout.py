"""The page's frame: every component outside the views' tabs, where it sits, and nothing that
happens when it is used. The tabs come from the registry (``explorer/ui/tabs/``), each laid out by
its own module; the page's CSS and JavaScript are files in ``explorer/ui/static/``.

``build_page`` is called inside a ``gr.Blocks`` and returns a ``Page``, each component under the
name it was added with. Callbacks (``explorer.ui.events``, ``explorer.ui.lifecycle``, the tabs')
return their updates keyed by these names; ``explorer.ui.app`` wires the names to the components.
"""

from __future__ import annotations

import json
import os

import gradio as gr

from explorer.lessons import LESSONS
from explorer.present import views
from explorer.present.tabs import TABS
from explorer.present.views import MEAN
from explorer.sampling import SEED_RANGE, TEMPERATURE_RANGE, TOP_K_RANGE, TOP_P_RANGE
from explorer.ui import answer_cover, texts
from explorer.ui.features import FEATURES, placed
from explorer.ui.page import Page
from explorer.ui.static_files import static
from explorer.ui.tabs import code
from explorer.ui.texts import DECODER_EXAMPLES, TRANSLATOR_EXAMPLES
from explorer.viz import colours

BROWSER_KEY = "decoder-explorer-session"
LESSONS_KEY = "decoder-explorer-lessons"  # which lesson steps this browser has answered
WORKSHOP_KEY = "decoder-explorer-workshop"  # this browser's seat in a workshop (explorer.present.workshop_seats)
MINE_KEY = "decoder-explorer-workshops-started"  # the workshops this browser started, to lead or end again

TEXT_ENV = "DECODER_EXPLORER_TEXT"  # the text a page opens with (python -m explorer --text)


# Images that take clicks are buttons in Gradio, named by nothing (an image without alt text):
# what a screen reader says for each.
BUTTON_NAMES = {
    "all-heads": "Every head of this layer: click one to open it",
    "head-roles": "Every head of the model by role: click one to open it",
}
CSS = static("page.css") + "".join(static(name) for feature in FEATURES for name in feature.styles)
# What the page runs once it has loaded (gr.Blocks.launch's js): the strip following the newest
# token, the keyboard shortcuts, names for a screen reader.
TEACHER_LINK = static("teacher_link.js")  # a teacher link's secret taken out of the address (returned)
PAGE_SCRIPT = (
    static("page.js")
    .replace("__BUTTON_NAMES__", json.dumps(BUTTON_NAMES))
    .replace("__TEACHER_LINK__", TEACHER_LINK)
    .replace("__COVERED__", json.dumps(answer_cover.COVERED))
)
# The load event's first step: the secret for its body (kept nowhere else after it).
TEACHER_LINK_SCRIPT = (
    f"() => {{ const secret = ({TEACHER_LINK})(); window.__decoderTeacherSecret = ''; return secret; }}"
)
# In the page's <head>, before Gradio reads the kept session: each tab's own copy first.
TAB_SESSION_HEAD = static("tab_session.js").replace("__KEY__", BROWSER_KEY)
PRESENTER_SCRIPT = static("presenter.js")  # presenter mode on or off (a class on the body)
SHOW_FEEDBACK = static("show_feedback.js")  # after Check: the lesson's feedback scrolled into sight


def theme() -> gr.themes.Base:
    """Gradio's Soft theme with text dark enough to read (WCAG AA, 4.5:1; checked with axe-core in
    tests/browser/test_accessibility.py): its labels, buttons and quiet text were 2.4-3.6:1."""
    return gr.themes.Soft().set(
        block_label_text_color="*primary_700", block_title_text_color="*primary_700",
        body_text_color_subdued="*neutral_600", link_text_color="*primary_700",
        button_primary_background_fill="*primary_600", button_primary_background_fill_hover="*primary_700",
        button_primary_text_color="white", checkbox_label_background_fill_selected="*primary_600",
        checkbox_label_background_fill_selected_dark="*primary_600",
    )  # fmt: skip


# The settings a new session is made from, in the order the session callbacks take them.


def example_picker(examples: list[str], label: str, text: gr.Textbox) -> None:
    """Clickable examples that set only the text box's value.

    (gr.Examples also sends the box's first settings back with the value, which turned the
    translator's "Source sentence" label back into "Prompt".)
    """
    picker = gr.Dataset(components=["textbox"], samples=[[example] for example in examples], label=label)
    picker.click(lambda sample: sample[0], inputs=picker, outputs=text, queue=False, show_progress="hidden")


def build_page(browser_secret: str) -> Page:
    """Lay out the page (inside a gr.Blocks); returns its components.

    Made for a projector: the model, the text and the buttons on one row; under it the tokens and
    the candidates on the left and the views on the right, so that after a Step the button, the
    strip, the candidates and the heatmap are all in sight at 1280x720 (tests/browser/test_projector.py).
    The settings follow the candidates, below the fold. On a phone everything stacks in that order.
    """
    page = Page()
    page.add(
        state=gr.State(None),
        # This tab's session as the browser keeps it (localStorage), so that a reload or a server
        # restart (a Space sleeps and wakes) brings it back: the tokens are replayed through the model.
        kept=gr.BrowserState(None, storage_key=BROWSER_KEY, secret=browser_secret),
        lessons_done=gr.BrowserState({}, storage_key=LESSONS_KEY, secret=browser_secret),
        workshop_seat=gr.BrowserState(None, storage_key=WORKSHOP_KEY, secret=browser_secret),
        workshop_mine=gr.BrowserState([], storage_key=MINE_KEY, secret=browser_secret),
    )
    page.add(**workshop_machinery())
    # Its "Join a workshop" link opens the Workshop panel (inside Lessons, where it costs the
    # projector's first screen nothing): a student on a phone finds it from the top.
    gr.Markdown(texts.INTRO, elem_id="intro")
    with gr.Row(equal_height=False, elem_id="top-row"):
        with gr.Column(scale=3, min_width=240):  # room for the longest model name and its kind
            lay_out(page, "top")
        with gr.Column(scale=3, min_width=300):
            page.add(
                # At most 5 lines tall, scrolling inside: a long text must not push the views down.
                text=gr.Textbox(
                    label="Prompt", value=os.environ.get(TEXT_ENV) or DECODER_EXAMPLES[0], lines=2, max_lines=5,
                    elem_id="prompt",
                ),
                # A refused text (too long, no tokens) is said here until the box changes (tab.TextRefused).
                prompt_note=gr.Markdown("", elem_id="prompt-note"),
            )  # fmt: skip
        with gr.Column(scale=3, min_width=280):
            page.add(**buttons())
    with gr.Row(equal_height=False, elem_id="workbench"):
        with gr.Column(scale=2, min_width=300):
            page.add(**lessons_panel(), **session_panel())
            with gr.Column(elem_id="explorer-settings"):  # folded away on a student's page (page.css)
                page.add(**settings(page, page.text))
        with gr.Column(scale=3, min_width=300):
            page.add(**view_choice())
            view_tabs(page)
    return page


def view_tabs(page: Page) -> None:
    """The views, one tab each, in the registry's order; each tab's module lays out its inside.
    Tabs that do not fit the width wrap onto another row (a "…" menu would hide them)."""
    with gr.Tabs(elem_id="views", overflow_behavior="wrap") as tabs:
        page.add(tabs=tabs)
        for tab in TABS:
            with gr.Tab(tab.title, id=tab.id, visible=not tab.translator_only, elem_id=f"tab-{tab.id}") as block:
                page.add(**{tab.component: block})
                code(tab).layout(page)


def lessons_panel() -> dict:
    """Guided lessons (explorer.lessons): closed until a lesson is chosen or linked to."""
    made = {}
    with gr.Accordion("Lessons", open=False, elem_id="lessons") as made["lessons_panel"]:
        made["lesson"] = gr.Dropdown(
            choices=[(f"{lesson.number}. {lesson.title}", lesson.number) for lesson in LESSONS], value=None,
            label="Lesson", elem_id="lesson",
        )  # fmt: skip
        made["lesson_text"] = gr.Markdown(texts.LESSONS, elem_id="lesson-text")
        made["lesson_answer"] = gr.Radio([], label="Your answer", elem_id="lesson-answer")
        with gr.Row():
            made["lesson_check"] = gr.Button("Check", variant="primary", elem_id="lesson-check", size="sm")
            made["lesson_next"] = gr.Button("Next step", elem_id="lesson-next", size="sm")
            made["lesson_back"] = gr.Button("Back to your text", elem_id="lesson-back", size="sm", visible=False)
        made["lesson_feedback"] = gr.Markdown(elem_id="lesson-feedback")
        # A workshop runs a lesson with a class; folded inside Lessons, it costs the projector's
        # first screen nothing (tests/browser/test_projector.py).
        made |= workshop_panel()
    return made


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
                made["workshop_start"] = gr.Button("Start a workshop", size="sm", elem_id="workshop-start")
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
    # requests, not Gradio events (explorer.ui.workshop_round; static/page.js, the workshop part).
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
    """What the page's script reads and clicks (static/page.js, the workshop part): the seat's
    code and part, and the button it presses when the workshop changed. Never shown."""
    return {
        "workshop_live": gr.Textbox(
            label="Workshop (read by the page's script)", elem_id="workshop-live", elem_classes="machine-only"
        ),
        # A teacher link's secret, taken out of the address by TEACHER_LINK_SCRIPT for the load event
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
        # Pressed by the page's script for the intro's "Join a workshop" link (it opens the panels).
        "workshop_open": gr.Button("Open the Workshop panel", elem_id="workshop-open", elem_classes="machine-only"),
        # Pressed by the page's script after a following student moved the view themselves: their
        # panel says at once that they explore on their own.
        "workshop_own_move": gr.Button(
            "Say that I explore on my own", elem_id="workshop-own-move", elem_classes="machine-only"
        ),
    }


def lay_out(page: Page, place: str) -> None:
    """The features placed at ``place`` (explorer.ui.features), in the registry's order."""
    for feature in placed(place):
        feature.layout(page, place)


def settings(page: Page, text: gr.Textbox) -> dict:
    """Below the candidates: the examples, the generation settings, the panels placed there (each
    an accordion), the display, another model (where the operator allows it) and the model's description."""
    made = {}
    with gr.Column(visible=True) as made["decoder_examples"]:
        example_picker(DECODER_EXAMPLES, "Examples", text)
    with gr.Column(visible=False) as made["translator_examples"]:
        example_picker(TRANSLATOR_EXAMPLES, "Example sentences", text)
    made["chat"] = gr.Checkbox(label="Use the chat template", value=False, elem_id="chat")
    made["max_new"] = gr.Slider(1, 256, value=40, step=1, label="Generate at most this many tokens", elem_id="max-new")
    with gr.Accordion("Sampling", open=False):
        made["temperature"] = gr.Slider(*TEMPERATURE_RANGE, value=0, step=0.05, label="Temperature (0 = greedy)")
        made["top_k"] = gr.Slider(*TOP_K_RANGE, value=0, step=1, label="Top-k (0 = off)")
        made["top_p"] = gr.Slider(*TOP_P_RANGE, value=1, step=0.05, label="Top-p")
        made["seed"] = gr.Number(value=0, precision=0, minimum=SEED_RANGE[0], maximum=SEED_RANGE[1], label="Seed")
    lay_out(page, "settings")  # the panels among the settings, each its own accordion
    with gr.Accordion("Display", open=False, elem_id="display"):
        made |= display()
    lay_out(page, "settings-end")
    made["model_info"] = gr.Markdown(elem_classes="explain", elem_id="model-info")
    return made


def buttons() -> dict:
    # Step, Generate, Undo, Reset are off until the page's first model has loaded (a click then
    # would find no session).
    with gr.Row():
        made = {
            "step_button": gr.Button("Step", variant="primary", elem_id="step", min_width=70, interactive=False),
            "generate_button": gr.Button("Generate", elem_id="generate", min_width=70, interactive=False),
            "stop_button": gr.Button("Stop", variant="stop", elem_id="stop", min_width=70),
        }
    with gr.Row():
        made["undo_button"] = gr.Button("Undo", elem_id="undo", min_width=70, interactive=False)
        made["reset_button"] = gr.Button("Reset", elem_id="reset", min_width=70, interactive=False)
        made["use_cache"] = gr.Checkbox(label="KV cache", value=True, elem_id="kv-cache", min_width=110)
    return made


def display() -> dict:
    return {
        "presenter": gr.Checkbox(
            label="Presenter mode: larger text and figures for the back row", value=False, elem_id="presenter"
        ),
        "colour_scale": gr.Radio(
            colours.CHOICES, value=colours.DEFAULT_SCALE, label="Attention colours", elem_id="colour-scale"
        ),
    }


def session_panel() -> dict:
    """The right column: the status line, the tokens, the next-token candidates."""
    made = {
        "status": gr.Markdown(texts.LOADING, elem_id="status"),
        "source": gr.HighlightedText(
            label="Source sentence tokens", color_map={"source": "#fee6ce"}, show_legend=False,
            show_inline_category=False, visible=False, elem_id="source-strip",
        ),
        "source_note": gr.Markdown(visible=False, elem_id="source-note"),
        "strip": gr.HighlightedText(
            label="Tokens (click one to inspect it as the query)", color_map=views.strip_colors(False),
            show_legend=True, show_inline_category=False, elem_id="token-strip",
        ),
    }  # fmt: skip
    made["candidates"] = gr.Dataframe(
        headers=["", "candidate", "probability", ""], datatype="str", interactive=False, elem_id="candidates",
        label="Next-token candidates", max_height=228,  # it scrolls: the heatmap beside it stays in sight
        column_widths=["9%", "29%", "32%", "30%"],  # room for the longest bar (20 blocks)
    )  # fmt: skip
    gr.Markdown(texts.CANDIDATES, elem_classes="explain", elem_id="candidates-explain")
    # While a question asks which token comes next: what the page's script covers, and why
    # (explorer.ui.answer_cover; static/page.js). Read by the script only.
    made["answer_cover"] = gr.Textbox(
        label="What is hidden (read by the page's script)", elem_id="answer-cover", elem_classes="machine-only"
    )
    return made


def view_choice() -> dict:
    # Side by side where there is room, one above the other on a phone (each needs ~260 px).
    with gr.Row():
        return {
            "layer": gr.Slider(0, 1, value=0, step=1, label="Layer", elem_id="layer", min_width=260),
            "head": gr.Dropdown(
                choices=[("average of all heads", MEAN)], value=MEAN, label="Head", elem_id="head", min_width=260
            ),
        }
