"""The Workshop panel's events: the page's load (a workshop link, or the seat this browser kept),
start or join, the teacher's questions, and the hidden Syncs the page's script presses when the
workshop changed. The callbacks are ``explorer.ui.workshop_events``'."""

from __future__ import annotations

import gradio as gr

from explorer.ui import workshop_events
from explorer.ui.lesson_events import LESSON_VIEWS
from explorer.ui.page import Page
from explorer.ui.static_files import static
from explorer.ui.wiring import Wiring, on
from explorer.ui.workshop_events import LINKS, WORKSHOP_VIEWS

# The Workshop panel scrolled into sight, its room code's box ready to type in (after "Join or run a workshop").
SHOW_WORKSHOP = """() => requestAnimationFrame(() => {
    document.querySelector('#workshop')?.scrollIntoView({block: 'start'});
    document.querySelector('#workshop-code input, #workshop-code textarea')?.focus({preventScroll: true}); })"""
# The browser kept another view of the tab (its session's BrowserState changed): said to the page's script.
VIEW_KEPT = "() => { document.dispatchEvent(new Event('decoder-explorer-view-kept')); }"
# End's question scrolled into sight once drawn (it opened below a 720-pixel projector's edge).
SHOW_END_CONFIRM = """() => { let tries = 20; const look = () => {
    const asked = document.querySelector('#workshop-end-confirm');
    if (asked && asked.offsetParent) asked.scrollIntoView({block: 'center', behavior: 'instant'});
    else if (tries-- > 0) setTimeout(look, 50); }; look(); }"""
# After Start: a refusal's note scrolled into sight once drawn (under the button, at a 720-pixel
# screen's edge); a workshop started, its room code at the top of the screen (the page stayed where
# the Start button had been, on the student link, the code and the question's buttons above it).
SHOW_AFTER_START = """() => { let tries = 40; const look = () => {
    const note = document.querySelector('#workshop-start-note');
    const room = document.querySelector('#workshop-room');
    const now = {behavior: 'instant'};
    if (note && note.querySelector('p') && note.textContent.trim()) note.scrollIntoView({block: 'center', ...now});
    else if (room && room.offsetParent && room.textContent.trim()) room.scrollIntoView({block: 'start', ...now});
    else if (tries-- > 0) setTimeout(look, 50); }; look(); }"""
# Opens the answers' download link the event just made (then empties it: a ticket is used once).
OPEN_DOWNLOAD = """(link) => { if (link) { const a = document.createElement('a');
  a.href = new URL(link, location.href).href; a.download = ''; document.body.append(a); a.click(); a.remove(); }
  return ''; }"""
WHOLE_LINKS = "(a, b) => [a, b].map(q => q && q.startsWith('?') ? location.origin + location.pathname + q : q)"


TEACHER_LINK = static("teacher_link.js")  # a teacher link's secret taken out of the address (returned)
# Its client code (the long poll, a student's question, the own move; static/workshop.js), which
# takes the secret out of the address first; the long poll's pauses are static/workshop_wait.js's.
SCRIPT = (
    static("workshop.js")
    .replace("__TEACHER_LINK__", TEACHER_LINK)
    .replace("__WAIT_PARTS__", static("workshop_wait.js"))
)
# The workshop's load event's first step: the secret for its body (kept nowhere else after it).
TEACHER_LINK_SCRIPT = (
    f"() => {{ const secret = ({TEACHER_LINK})(); window.__decoderTeacherSecret = ''; return secret; }}"
)


def wire(wiring: Wiring) -> None:
    """Its events change every view (a workshop's step, the teacher's view followed), the Lessons
    panel's (a lesson step asked or followed) and its own."""
    page = wiring.page
    shown = {*wiring.restored, *page.pick(*LESSON_VIEWS), *page.pick(*WORKSHOP_VIEWS)}
    wire_load(wiring, shown)
    wire_panel(page, shown)


def wire_load(wiring: Wiring, shown: set) -> None:
    """After the page's load (it needs the page's session first): a workshop link or the seat this
    browser kept; a teacher link's secret goes from the address into the event's body, never into
    a URL. And the workshops this browser started, to lead or end one again."""
    page, p = wiring.page, wiring.page.pick
    link = page.workshop_link
    wiring.loaded.then(None, None, [link], js=TEACHER_LINK_SCRIPT).then(
        on(page, workshop_events.on_load),
        [page.state, page.workshop_seat, link, page.workshop_mine],
        {*shown, *p(*LINKS), link, page.workshop_mine},
    ).then(None, p(*LINKS), p(*LINKS), js=WHOLE_LINKS)


def wire_panel(page: Page, shown: set) -> None:
    """The Workshop panel: start or join, the teacher's questions, and the hidden Syncs the page's
    script presses when the workshop changed (explorer/ui/static/workshop.js). A student's question and
    answers are not Gradio events (explorer.ui.workshop_round)."""
    p, state = page.pick, page.state
    panel = p(*WORKSHOP_VIEWS)
    # Start waits for a lesson: the list's value says whether one is chosen (a link, a model switch set it too).
    page.lesson.change(on(page, workshop_events.start_button), [page.lesson], [page.workshop_start], queue=False)
    page.workshop_start.click(
        on(page, workshop_events.on_start), [state, page.workshop_mine], [*panel, *p(*LINKS), page.workshop_mine]
    ).then(None, p(*LINKS), p(*LINKS), js=WHOLE_LINKS).then(None, js=SHOW_AFTER_START)
    page.workshop_mine_open.click(
        on(page, workshop_events.on_open_mine), [state, page.workshop_mine, page.workshop_mine_pick],
        {*shown, *p(*LINKS)},
    ).then(None, p(*LINKS), p(*LINKS), js=WHOLE_LINKS)  # fmt: skip
    page.workshop_join.click(on(page, workshop_events.on_join), [state, page.workshop_code, page.workshop_name], shown)
    # A change seen while the last one is still being shown: only the newest is shown next. The
    # panel's own sync has the panel's outputs only (a class of thirty sends one at every question).
    hidden = {"trigger_mode": "always_last", "show_progress": "hidden"}
    # (and the Lessons panel's text: a student's workshop that ended gives it back, ``ended``)
    page.workshop_sync.click(on(page, workshop_events.on_sync), [state], [*panel, page.lesson_text], **hidden)
    page.workshop_follow_sync.click(on(page, workshop_events.on_follow_sync), [state], shown, **hidden)
    page.workshop_follow.input(on(page, workshop_events.on_follow), [state, page.workshop_follow], shown)
    page.workshop_back.click(on(page, workshop_events.on_back), [state], shown)
    # "Join or run a workshop" near the top: the Lessons and Workshop panels opened, and the room code's box in sight.
    page.workshop_open.click(
        on(page, workshop_events.on_open), None, p("lessons_panel", "workshop_panel"), queue=False
    ).then(None, js=SHOW_WORKSHOP)
    # A following student's own move: the panel's script (static/workshop.js) hears of each view the
    # browser keeps, and presses this hidden button after one of the person's own.
    page.workshop_own_move.click(on(page, workshop_events.on_own_move), [state], panel, **hidden)
    page.kept.change(None, js=VIEW_KEPT)
    # Asking a lesson step's question (or again) may first put the step's own view back: every view.
    page.workshop_ask.click(on(page, workshop_events.on_ask), [state], shown)
    page.workshop_again.click(on(page, workshop_events.on_again), [state], shown)
    for button, callback in (
        (page.workshop_ask_next, workshop_events.on_ask_next),
        (page.workshop_reveal, workshop_events.on_reveal),
    ):
        button.click(on(page, callback), [state], panel)
    # One click: the event gets a download link (a ticket used once), the script opens it at once.
    link = page.workshop_csv_link
    page.workshop_csv_button.click(on(page, workshop_events.on_csv), [state], [link]).success(
        None, [link], [link], js=OPEN_DOWNLOAD
    )
    info = [page.workshop_info]
    page.workshop_lock.input(on(page, workshop_events.on_lock), [state, page.workshop_lock], info)
    page.workshop_seats.submit(on(page, workshop_events.on_seats), [state, page.workshop_seats], info)
    page.workshop_remove.click(on(page, workshop_events.on_remove), [state, page.workshop_remove_pick], panel)
    confirm = page.workshop_end_confirm
    page.workshop_end.click(lambda: gr.Column(visible=True), None, [confirm], queue=False).then(
        None, js=SHOW_END_CONFIRM
    )
    page.workshop_end_no.click(lambda: gr.Column(visible=False), None, [confirm], queue=False)
    page.workshop_end_yes.click(
        on(page, workshop_events.on_end), [state, page.workshop_mine], [*panel, page.workshop_mine, confirm]
    )
    page.workshop_leave.click(on(page, workshop_events.on_leave), [state], panel)
