"""The Workshop panel: a teacher starts a workshop on a lesson and leads; students join with a room
code, follow the teacher's view, answer each question before it is revealed, and see whether they
were right. Everything shared lives in the database (``explorer.workshop``); this module turns it
into the page.

How a page learns that something changed: its script asks ``/workshop/wait``, a long poll that
answers when the workshop changed (``explorer.ui.workshop_watch``). A teacher's page then clicks
the panel's hidden Sync button (one Gradio event per change, nothing while nothing changes); a
student's page asks for its question itself and draws it, and sends its answers, without a Gradio
event (``explorer.ui.workshop_round``); it presses a Sync only to take the teacher's moved view.

The teacher's view is published after every event of the teacher's tab that changed it (the panel's
hook, ``explorer.ui.panels.workshop.after_event``, which ``explorer.ui.wiring.on`` calls with the
view the browser keeps: model, text, tokens, tab, layer, head), together with the lesson step on screen.
"""

from __future__ import annotations

import dataclasses
import html
import json
import threading

import gradio as gr

from explorer import lessons
from explorer.analysis import snapshot
from explorer.errors import InputError, as_sentence
from explorer.lessons import LESSONS
from explorer.present import model_store
from explorer.present.lesson_at import LessonAt
from explorer.present.views import ExplorerState
from explorer.present.workshop_seats import Following, Leading, kept_seat
from explorer.ui import (
    answer_cover,
    lesson_events,
    lifecycle,
    texts,
    workshop_download,
    workshop_gate,
    workshop_round,
    workshop_shared,
    workshop_watch,
)
from explorer.ui.shown import Updates, kept_value, shown_plot
from explorer.ui.tab import USER_ERRORS, log, require, tab_event
from explorer.ui.workshop_gate import NO_SEAT, TooManyMisses, address_of
from explorer.viz.workshop import tally_figure
from explorer.workshop import Limits, WorkshopError, Workshops, connect, room_code
from explorer.workshop.database import describe
from explorer.workshop.questions import asked_at, lesson_question, lesson_title, next_token_question
from explorer.workshop.rules import SeatGone
from explorer.workshop.service import purge_every

# Everything the panel shows; each event returns the part it changed.
WORKSHOP_VIEWS = (
    "workshop_panel", "workshop_info", "workshop_enter", "workshop_teacher", "workshop_student", "workshop_live",
    "workshop_seat", "workshop_chart", "workshop_tally", "workshop_follow", "workshop_code", "workshop_focus",
    "workshop_room", "lesson_answer", "lesson_check", "lesson_next", "answer_cover", "workshop_lock", "workshop_seats",
    "workshop_remove_pick", "workshop_mine_pick", "workshop_mine_row", "workshop_start_note",
)  # fmt: skip
LINKS = ("workshop_student_link", "workshop_teacher_link")


# The Workshop panel sits inside the Lessons panel: a page that opens in a workshop opens both.
def opened() -> Updates:
    return {"lessons_panel": gr.Accordion(open=True), "workshop_panel": gr.Accordion(open=True)}


def on_open() -> Updates:
    """ "Join or run a workshop", near the top of the page: both panels opened."""
    return opened()


_store: Workshops | None = None
_store_lock = threading.Lock()


def store() -> Workshops:
    """The workshops of this app, on its database (made on first use, shared by every tab)."""
    global _store
    with _store_lock:
        if _store is None:
            engine = connect()
            _store = Workshops(engine, Limits.from_env())
            log.info("workshops kept in %s (%d expired deleted)", describe(engine), _store.purge())
            purge_every(_store)  # an expired workshop is deleted within a minute, whoever comes
        return _store


def add_routes(app) -> None:
    """The workshop's long poll (``explorer.ui.workshop_watch``) and a student's question and
    answer (``explorer.ui.workshop_round``), ahead of Gradio's own routes (the app is Gradio's
    FastAPI app)."""
    workshop_watch.add_routes(app, store)
    workshop_round.add_routes(app, store)
    workshop_download.add_route(app, store)
    opener = threading.Timer(PURGE_START_S, open_store_quietly)  # the purge runs after a restart, visitors or not
    opener.daemon = True
    opener.start()


PURGE_START_S = 30.0  # after the app started: its first pages are served first


def open_store_quietly() -> None:
    """Open the workshops' database (which starts its purge) from a timer: a database that cannot
    be reached is one line in the log here, and the page says so when a workshop is used."""
    try:
        store()
    except Exception as error:  # any driver's error: said in one line, never a traceback
        log.warning("the workshops' database is not reachable yet (%s); expired workshops are deleted "
                    "once it is", str(error)[:200])  # fmt: skip


# ---------------------------------------------------------------- the teacher's view, published
def publish(st: ExplorerState, seat: Leading) -> None:
    view = led_view(st)
    text = as_json(view)
    if text == seat.published:
        return
    try:
        store().lead(seat.code, seat.secret, view)
        seat.published = text
        workshop_shared.publish(seat.code, model_store.public_name(st.model_name), st.session)
    except WorkshopError as error:  # the workshop ended or expired: the teacher's page goes on alone
        log.info("workshop %s: the view was not published: %s", seat.code, error)


def led_view(st: ExplorerState) -> dict:
    at = st.lesson
    lesson = [at.number, at.index] if isinstance(at, LessonAt) and st.model_name == at.model_name else None
    return {"session": kept_value(st), "lesson": lesson}


def as_json(value) -> str:
    return json.dumps(value, sort_keys=True)


# ---------------------------------------------------------------- starting, joining, leaving
START_WITHOUT_LESSON = "Start a workshop (choose a lesson above first)"


def start_button(lesson: object) -> Updates:
    """Start is offered once the Lessons list has a lesson (the workshop runs it with the class):
    before, it says what to choose instead of refusing after a click."""
    chosen = isinstance(lesson, int) and not isinstance(lesson, bool)
    label = f"Start a workshop on lesson {lesson}" if chosen else START_WITHOUT_LESSON
    return {"workshop_start": gr.Button(value=label, interactive=chosen)}


@tab_event
def on_start(request: gr.Request, st, mine) -> Updates:
    st = require(st)
    try:
        return start(request, st, mine)
    except WorkshopError as error:
        # Said in the panel too, beside Start, until the next try: the toast alone sat top-right,
        # far from the button, and faded (a teacher refused by the per-network limit missed it).
        gr.Warning(str(error))
        return {"workshop_start_note": start_refused(error)}


def start_refused(error: WorkshopError) -> str:
    """The panel's note for a refused Start: what happened, why and what to do (the refusal's own
    sentence says both). It names no workshop: another teacher's, at the same address, is theirs."""
    return f"**No workshop was started.** {as_sentence(error)} Then press Start again."


def start(request: gr.Request, st: ExplorerState, mine) -> Updates:
    if st.lesson is None:
        raise WorkshopError("Choose a lesson first (the Lessons list): the workshop runs it with the class.")
    started = store().start(st.lesson.number, owner=client_address(request))
    st.workshop = Leading(started.code, started.secret, st.lesson.number)
    publish(st, st.workshop)
    log.info("workshop %s started on lesson %d", started.code, st.lesson.number)
    kept = [*live_mine(mine), {"code": started.code, "secret": started.secret}]
    return {**panel(st), **links(st), "workshop_mine": kept}


# ---------------------------------------------------------------- the workshops this browser started
MINE_KEPT = 20  # the most this browser keeps (the server bounds the live ones per address)


def live_mine(mine: object) -> list[dict]:
    """The workshops this browser started that still run, as it kept them ({code, secret}): what
    the browser sends back is untrusted, each is checked against the database."""
    if not isinstance(mine, list):
        return []
    found = []
    for kept in mine[-MINE_KEPT:]:
        if not isinstance(kept, dict):
            continue
        try:
            store().check_teacher(kept.get("code"), kept.get("secret"))
        except WorkshopError:
            continue
        found.append({"code": room_code(kept["code"]), "secret": kept["secret"]})
    return found


def mine_pick(mine: list[dict], leading: str | None = None) -> Updates:
    """The other workshops this browser started: the teacher opens one to lead it, or end it."""
    codes = [kept["code"] for kept in mine if kept["code"] != leading]
    return {
        "workshop_mine_pick": gr.Dropdown(choices=codes, value=codes[0] if codes else None),
        "workshop_mine_row": gr.Row(visible=bool(codes)),
    }


@tab_event
def on_open_mine(request: gr.Request, st, mine, code) -> Updates:
    """Lead one of the workshops this browser started (then "End the workshop" ends it)."""
    kept = next((k for k in live_mine(mine) if k["code"] == code), None)
    if kept is None:
        raise WorkshopError("That workshop has ended: choose another one, or start a new workshop.")
    return resume_teacher(request, st, kept["code"], kept["secret"])


@tab_event
def on_join(request: gr.Request, st, code, name) -> Updates:
    st = require(st)
    address = client_address(request)
    gate(address)
    try:
        seat = store().join(code, name, address)
    except WorkshopError:
        if store().pulse(code) is None:  # no such live workshop: a miss (a full one is not)
            workshop_gate.MISSES.miss(address)
        raise
    st.workshop = Following(seat)
    return {**sync(request, st), **panel(st)}


def gate(address: str) -> None:
    """Refused for a minute once ``address`` missed too often (``explorer.ui.workshop_gate``)."""
    try:
        workshop_gate.MISSES.check(address)
    except TooManyMisses as error:
        raise WorkshopError(str(error)) from error


@tab_event
def on_leave(st) -> Updates:
    return leave(st)


def leave(st) -> Updates:
    """A student leaves (their answers stay with the workshop), or a teacher ends the workshop
    (then it is deleted with every answer: they downloaded them first)."""
    st = require(st)
    seat = st.workshop
    if isinstance(seat, Leading):
        store().end(seat.code, seat.secret)
        workshop_shared.forget(seat.code)
        log.info("workshop %s ended by its teacher", seat.code)
        said = f"Workshop {seat.code} has ended: it is deleted, with its answers."
    else:
        said = "You left the workshop; your answers stay with it. The page is yours again."
    st.workshop = None
    return {**panel(st), "workshop_info": f"{said}\n\n{texts.WORKSHOP}", "answer_cover": answer_cover.lesson_cover(st)}


@tab_event
def on_end(st, mine) -> Updates:
    """The teacher ends the workshop; the list of the browser's other workshops follows."""
    out = leave(st)
    left = live_mine(mine)
    return {**out, "workshop_mine": left, **mine_pick(left), "workshop_end_confirm": gr.Column(visible=False)}


def client_address(request: gr.Request) -> str:
    return address_of(request)


# ---------------------------------------------------------------- the page's load
@tab_event
def on_load(request: gr.Request, st, kept, teacher_secret="", mine=None) -> Updates:
    """The workshop part of the page's load (``load_seat``), and the list of the workshops this
    browser started (the teacher opens one to lead or end it)."""
    out = load_seat(request, st, kept, teacher_secret)
    if not isinstance(mine, list) or not mine:
        return out
    left = live_mine(mine)
    skipped = not isinstance(out, dict) or out.get("__type__") == "update"  # gr.skip(): nothing of the seat
    now = out.get("state") if not skipped and isinstance(out.get("state"), ExplorerState) else st
    leading = getattr(getattr(now, "workshop", None), "code", None)
    picked = {"workshop_mine": left, **mine_pick(left, leading)}
    if left and leading is None:  # a teacher whose tab lost its place: their workshops in sight
        picked |= opened()
    return picked if skipped else {**out, **picked}


def load_seat(request: gr.Request, st, kept, teacher_secret="") -> Updates:
    """After the page's session is back: a workshop link (``?workshop=CODE``; a teacher's adds
    ``#teacher=SECRET``, which the page's script takes out of the address and sends here as
    ``teacher_secret``: never in a URL) or the seat this browser kept (a reload, a server restart).
    A link or kept seat that names no seat is refused with the one sentence every such request
    gets (``workshop_gate.NO_SEAT``), and counts as a miss of the address."""
    linked = request.query_params.get("workshop")
    secret = teacher_secret if isinstance(teacher_secret, str) and 0 < len(teacher_secret) <= 200 else ""
    kept = kept if isinstance(kept, dict) and (not linked or same_code(linked, kept.get("code"))) else None
    if not (linked and secret) and kept is None:
        return student_link(linked) if linked else {"workshop_link": ""}
    address = client_address(request)
    try:
        gate(address)
        out = resume_teacher(request, st, linked, secret) if linked and secret else resumed(request, st, kept)
    except WorkshopError as error:
        if not isinstance(error.__cause__, TooManyMisses):
            workshop_gate.MISSES.miss(address)
            error = WorkshopError(NO_SEAT)
        return cannot_open(error)
    except USER_ERRORS as error:
        return cannot_open(error)
    return {**out, "workshop_link": ""}


def same_code(linked: str, kept_code: object) -> bool:
    try:
        return room_code(linked) == kept_code
    except WorkshopError:
        return False


def student_link(linked: str) -> Updates:
    """A student's link: a student's page (the join form first), the code filled in, the name theirs to type."""
    return {
        **opened(), "workshop_code": linked[:40], "workshop_link": "", "workshop_focus": True,
        "workshop_info": "Type your name if you want to (you can stay anonymous) and press **Join**.",
    }  # fmt: skip


def cannot_open(error: Exception) -> Updates:
    gr.Warning(f"The workshop cannot be opened: {as_sentence(error)}")
    return {**panel(None), **opened(), "workshop_link": ""}


def resumed(request: gr.Request, st, kept: dict) -> Updates:
    if kept.get("role") == "teacher":
        return resume_teacher(request, st, kept.get("code"), kept.get("secret"))
    seat = store().seat(kept.get("code"), kept.get("token"))
    st = require(st)
    # A student who was exploring on their own keeps their own session (restored before this);
    # only a literal False stops following (the kept seat is untrusted input).
    st.workshop = Following(seat, following=kept.get("following") is not False)
    return {**sync(request, st), **panel(st), **opened()}


def resume_teacher(request: gr.Request, st, code, secret) -> Updates:
    """The teacher's page again: their lesson step set up, then their led view (tokens stepped on)."""
    code = room_code(code)
    store().check_teacher(code, secret)
    _, view = store().led_view(code)
    lesson = store().lesson_of(code)
    out: Updates = {}
    at = view.get("lesson")
    if isinstance(at, list) and len(at) == 2:
        out = lesson_events.set_up(request, st, int(at[0]), int(at[1]), None)
        st = out["state"]
    st = require(st)
    if isinstance(view.get("session"), dict):
        out |= follow(request, st, view, keep_lesson=True)
    st.workshop = Leading(code, secret, lesson, published=as_json(led_view(st)))
    return {**out, **panel(st), **links(st), **opened()}


# ---------------------------------------------------------------- following the teacher
@tab_event
def on_sync(st) -> Updates:
    """Something changed in the workshop besides the teacher's view (the page's poll saw it): the
    teacher's count and chart, or a student's question and result. The panel alone."""
    seat = getattr(st, "workshop", None)
    try:
        if isinstance(seat, Leading):
            return teacher_views(st) | {"workshop_info": teacher_info(st)}
        if isinstance(seat, Following):
            store().seat(seat.seat.code, seat.seat.token)  # the page's poll may have said it is gone
            return student_views(st)
    except WorkshopError as error:  # ended, expired, or (a student's) seat removed
        return ended(st, error)
    return gr.skip()


@tab_event
def on_follow_sync(request: gr.Request, st) -> Updates:
    """The teacher's view moved: a following student's page takes it, and its panel."""
    if not isinstance(getattr(st, "workshop", None), Following):
        return gr.skip()
    try:
        return sync(request, st) | student_views(st)
    except WorkshopError as error:
        return ended(st, error)


@tab_event
def on_own_move(st) -> Updates:
    """A following student moved the view themselves (a Step, a token, a head: ``panels.workshop.after_event``
    stopped their following); their page's script presses this after such a move, so that the
    panel says at once that they explore on their own (and the whole explorer comes back)."""
    seat = getattr(st, "workshop", None)
    if not isinstance(seat, Following) or seat.following:
        return gr.skip()
    return student_views(st)


TEACHER_AFTER = "Start a new one from a lesson when you want to."
STUDENT_AFTER = (
    "Everything on your page stays yours: keep exploring on your own, or join another workshop with its room code."
)


def ended(st: ExplorerState, error: WorkshopError | None = None) -> Updates:
    """The tab's workshop is over for it: the panel says so and what they can do; the tab stops
    following (its own session, everything on the page, stays as it is). ``error`` is why the
    seat was refused: a student's seat gone from a workshop that runs on (``SeatGone``) is told
    that, any other that the workshop ended."""
    seat, st.workshop = st.workshop, None
    if isinstance(seat, Leading):
        said = f"**Workshop {seat.code} has ended** (it was ended from another page, or it expired). " + TEACHER_AFTER
    else:
        said = student_told(seat.seat.code if isinstance(seat, Following) else "", error) + STUDENT_AFTER
    # A student's box ready for another code, and the Lessons panel theirs again: no "your teacher
    # leads" (the page's script brings the sentence above into view, static/workshop.js).
    cleared = {} if isinstance(seat, Leading) else {"workshop_code": "", "lesson_text": own_lesson_text(st)}
    return {
        **panel(st), **cleared, "workshop_info": f"{said}\n\n{texts.WORKSHOP}",
        "answer_cover": answer_cover.lesson_cover(st),
    }  # fmt: skip


def student_told(code: str, error: WorkshopError | None) -> str:
    """What ended a student's part in the workshop, as the database told it (the page's script
    keeps either sentence in sight, static/workshop.js)."""
    if isinstance(error, SeatGone):
        return f"**Your teacher removed your place in workshop {code}.** Ask them if you should join again. "
    return f"**Workshop {code} has ended.** "


def own_lesson_text(st: ExplorerState) -> str:
    """The Lessons panel of a tab no longer in a workshop: its own lesson step, or the introduction."""
    at = st.lesson
    return texts.LESSONS if at is None else lesson_events.step_text(at.number, at.index)


@tab_event
def on_follow(request: gr.Request, st, following) -> Updates:
    """The Follow box: off, the student explores on their own; on, back to the teacher's view now."""
    seat = student(st)
    seat.following = bool(following)
    if seat.following:
        seat.version, seat.taken = -1, ""
    return {**sync(request, st), **student_views(st)}


@tab_event
def on_back(request: gr.Request, st) -> Updates:
    seat = student(st)
    seat.following, seat.version, seat.taken = True, -1, ""
    return {**sync(request, st), **student_views(st)}


def sync(request: gr.Request, st: ExplorerState) -> Updates:
    """A following student's tab takes the teacher's view when it changed."""
    seat = st.workshop
    store().seat(seat.seat.code, seat.seat.token)  # refused once the teacher removed it: the page says so
    version, view = store().led_view(seat.seat.code)
    if not seat.following or version == seat.version or not isinstance(view.get("session"), dict):
        return {}
    if as_json(view) == seat.taken:  # a question posed or revealed: the view itself is as it was
        seat.version = version
        return {}
    out = follow(request, st, view)
    seat.version, seat.applied, seat.taken = version, as_json(kept_value(st)), as_json(view)
    return out


def follow(request: gr.Request, st: ExplorerState, view: dict, keep_lesson: bool = False) -> Updates:
    """Put the teacher's session and view on this tab: the tokens it lacks are run (or the ones it
    has beyond the teacher's undone); another model, text or setting rebuilds the session."""
    snap = snapshot.checked_snapshot(view["session"])
    lesson = st.lesson
    shown_already = shows_settings_of(st, snap)  # (before catching up: the page shows the session's)
    session = caught_up(st, snap)
    if session is None:
        out, _ = lifecycle.apply_snapshot(request, st, snap)
    elif shown_already:  # only the tokens and the view move (the teacher stepped)
        out = lifecycle.show_tokens(st, session, snap)
    else:
        out = lifecycle.show_session(request, st, st.model_name, session, snap)
    st.lesson = lesson if keep_lesson else None  # a student answers in the workshop, not with Check
    if keep_lesson:
        return out
    cover = answer_cover.student_cover(view.get("lesson"), view["session"], len(st.session.token_ids))
    return out | {"lesson_text": led_lesson_text(view.get("lesson")), "answer_cover": cover}


def led_lesson_text(at: object) -> str:
    """What a following student reads in the Lessons panel: the lesson step the teacher is on (its
    question comes in the Workshop panel when the teacher asks it), or the lessons' introduction.
    ``at`` is [lesson, step index] from the teacher's view as stored (checked all the same)."""
    if not (isinstance(at, list) and len(at) == 2 and all(type(n) is int for n in at)):
        return texts.LESSONS
    try:
        heading, step, lesson = lesson_events.step_heading(*at), lessons.step_of(*at), lessons.lesson(at[0])
    except InputError:
        return texts.LESSONS
    # The lesson's name is said here: a student's page hides the Lessons list (not theirs to use
    # while the teacher leads; workshop.css), which showed nothing once they explored on their own.
    return (
        f"{heading} (your teacher leads *{lesson.title}*)\n\n{step.text}\n\n"
        "Your teacher asks this step's question in the Workshop panel: answer it there."
    )


# What a session's page shows besides its tokens and view (the model aside).
PAGE_SETTINGS = ("text", "chat", "use_cache", "temperature", "top_k", "top_p", "seed", "cache_policy")


def shows_settings_of(st: ExplorerState, snap: snapshot.Snapshot) -> bool:
    """Whether the tab's page shows ``snap``'s model and settings already (its session has them)."""
    if st.session is None or model_store.public_name(st.model_name) != snap.model:
        return False
    mine = snapshot.snapshot_of(snap.model, st.session)
    return all(getattr(mine, name) == getattr(snap, name) for name in PAGE_SETTINGS)


def caught_up(st: ExplorerState, snap: snapshot.Snapshot):
    """The tab's own session brought to ``snap``'s tokens, when only the tokens differ; else None.
    In the teacher's process, a fork of the teacher's session instead: no pass (workshop_shared)."""
    session = st.session
    seat = st.workshop
    if isinstance(seat, Following) and model_store.public_name(st.model_name) == snap.model:
        shared = workshop_shared.fork_for(seat.seat.code, snap)
        if shared is not None:
            return shared
    if session is None or model_store.public_name(st.model_name) != snap.model or session.interventions:
        return None
    mine = snapshot.snapshot_of(snap.model, session)
    if any(getattr(mine, name) != getattr(snap, name) for name in PAGE_SETTINGS):
        return None
    ours, theirs = marked(mine), marked(snap)
    shared = 0  # how many generated tokens the two share from the start
    while shared < min(len(ours), len(theirs)) and ours[shared] == theirs[shared]:
        shared += 1
    try:
        for _ in range(len(ours) - shared):
            session.undo()
        session.replay(snap.generated[shared:], forced={i - shared for i in snap.forced if i >= shared})
    except USER_ERRORS:
        return None
    return session


def marked(snap: snapshot.Snapshot) -> list[tuple[int, bool]]:
    forced = set(snap.forced)
    return [(token, i in forced) for i, token in enumerate(snap.generated)]


def student(st) -> Following:
    seat = getattr(st, "workshop", None)
    if not isinstance(seat, Following):
        raise WorkshopError("Join a workshop first: type the room code your teacher shows.")
    return seat


def teacher(st) -> Leading:
    seat = getattr(st, "workshop", None)
    if not isinstance(seat, Leading):
        raise WorkshopError("Only the teacher's page can do this: start a workshop from a lesson.")
    return seat


# ---------------------------------------------------------------- questions and answers
@tab_event
def on_ask(request: gr.Request, st) -> Updates:
    """Put the lesson step's question to the class. It is about the step's own view: when the
    teacher moved on (stepped, another layer, head or tab), that view is put back first, for the
    teacher and so for every following student, and the teacher's panel says so; when it cannot
    be, the teacher is told why and nothing is asked."""
    seat = teacher(st)
    at = st.lesson
    if at is None or st.model_name != at.model_name:
        raise WorkshopError("Open a lesson step first (the Lessons list): its question is what the class answers.")
    out, changes = step_view_back(request, st, seat)
    store().pose(seat.code, seat.secret, lesson_question(at.number, at.index, at.posed))
    noted(seat, changes)
    return {**out, **teacher_views(st)}


def step_view_back(request: gr.Request, st: ExplorerState, seat: Leading) -> tuple[Updates, list[str]]:
    """The lesson step's own view on the teacher's page, published for the class, when the
    teacher moved on from it; and what had moved (nothing: nothing changes). An InputError when it
    cannot be put back: then nothing may be asked."""
    changes = lesson_events.view_changes(st, st.lesson)
    if not changes:
        return {}, []
    try:
        out = lesson_events.back_to_step(request, st, st.lesson)
    except USER_ERRORS as error:
        raise WorkshopError(
            f"Nothing was asked: this step's view could not be put back ({as_sentence(error)}). Open the step "
            "again from the Lessons list, then ask."
        ) from None
    publish(st, seat)  # the class takes the step's view before its question comes
    return out, changes


def noted(seat: Leading, changes: list[str]) -> None:
    """What asking did first, said under the question just asked (on the teacher's panel)."""
    if changes:
        asked = store().tally(seat.code, seat.secret)
        seat.note = (asked.id, (
            f"Asked on the step's own view: yours had moved on ({'; '.join(changes)}), so the step's view was put "
            "back first, for you and every student who follows."
        ))  # fmt: skip


@tab_event
def on_ask_next(st) -> Updates:
    """Ask the class which token comes next here; the model's candidates are the choices."""
    seat = teacher(st)
    store().pose(seat.code, seat.secret, next_token_question(require(st).session))
    return teacher_views(st)


@tab_event
def on_reveal(st) -> Updates:
    seat = teacher(st)
    store().reveal(seat.code, seat.secret)
    revealed, at = store().tally(seat.code, seat.secret), st.lesson
    if at is not None and revealed is not None and answer_cover.ends_cover(at, revealed.title):
        # The class saw the step's answer: once the workshop ends, the teacher's page (alone with
        # the lesson again) does not cover it "until you check".
        st.lesson = dataclasses.replace(at, checked=True)
    return teacher_views(st)


@tab_event
def on_again(request: gr.Request, st) -> Updates:
    """The same question once more, about the same view: a lesson step's puts that step's view
    back first (as asking it did); "what token comes next?" is asked again only while the page
    holds the tokens it was asked at (after a Step the class has seen the answer)."""
    seat = teacher(st)
    last = store().tally(seat.code, seat.secret)
    out, changes = again_view(request, require(st), seat, last) if last is not None else ({}, [])
    store().ask_again(seat.code, seat.secret)
    noted(seat, changes)
    return {**out, **teacher_views(st)}


def again_view(request: gr.Request, st: ExplorerState, seat: Leading, last) -> tuple[Updates, list[str]]:
    if last.kind == "next-token":
        position, holds = asked_at(last.title), len(st.session.token_ids)
        if position is not None and position != holds:
            raise WorkshopError(
                f"Nothing was asked: that question was asked at token {position}, and the page holds {holds} tokens "
                "now (a Step shows the answer). Undo back to it, or ask “what token comes next?” afresh."
            )
        return {}, []
    at = st.lesson
    if at is None or st.model_name != at.model_name or lesson_title(at.number, at.index) != last.title:
        raise WorkshopError(
            f"Nothing was asked: that question is about {last.title}. Open that step again (the Lessons list), then "
            "ask again."
        )
    return step_view_back(request, st, seat)


@tab_event
def on_csv(st) -> Updates:
    """A link that downloads the answers given until it is opened (the page opens it at once:
    one click; ``explorer.ui.workshop_download``)."""
    seat = teacher(st)
    return {"workshop_csv_link": workshop_download.link(seat.code, store().download_ticket(seat.code, seat.secret))}


# ---------------------------------------------------------------- who is in the class
@tab_event
def on_lock(st, locked) -> Updates:
    seat = teacher(st)
    store().lock(seat.code, seat.secret, bool(locked))
    return {"workshop_info": teacher_info(st)}


@tab_event
def on_seats(st, seats) -> Updates:
    seat = teacher(st)
    if isinstance(seats, float) and seats.is_integer():
        seats = int(seats)
    store().allow_seats_per_address(seat.code, seat.secret, seats)
    return {"workshop_info": teacher_info(st)}


@tab_event
def on_remove(st, number) -> Updates:
    """Take a student out: their seat and its token stop working (their page is told)."""
    seat = teacher(st)
    if number is None:
        raise WorkshopError("Choose the student to remove first (the list beside the button).")
    store().remove(seat.code, seat.secret, number)
    return {**teacher_views(st), "workshop_info": teacher_info(st)}


# ---------------------------------------------------------------- the panel
def panel(st: ExplorerState | None) -> Updates:
    """The whole panel as the tab's seat has it: nothing, the teacher's, or a student's."""
    seat = getattr(st, "workshop", None)
    out: Updates = {
        "workshop_enter": gr.Column(visible=seat is None),
        "workshop_teacher": gr.Column(visible=isinstance(seat, Leading)),
        "workshop_student": gr.Column(visible=isinstance(seat, Following)),
        "workshop_seat": kept_seat(seat),
        "workshop_live": live_value(seat),
        # The lesson's own answer, Check and Next: away in a workshop, and without a lesson open.
        **lesson_events.lesson_controls(st),
        "workshop_focus": isinstance(seat, Following) and seat.following,
    }
    if seat is None:
        return {**out, "workshop_info": texts.WORKSHOP}
    out["workshop_panel"] = gr.Accordion(open=True)
    out["workshop_start_note"] = ""  # in a workshop: a refused Start is over
    if isinstance(seat, Leading):
        locked, seats = store().settings(seat.code, seat.secret)
        controls = {"workshop_lock": locked, "workshop_seats": seats, "workshop_room": room_code_html(seat.code)}
        return {**out, **teacher_views(st), **controls, "workshop_info": teacher_info(st)}
    return {**out, **student_views(st)}


def live_value(seat) -> str:
    """What the page's script reads: the code, the part, whether it follows, and the seat it polls
    with (``POST /workshop/wait``, in the body): the teacher's secret (the page holds it already,
    in the teacher link and in the browser's kept seat), or the student's token."""
    if isinstance(seat, Leading):
        return as_json({"code": seat.code, "role": "teacher", "secret": seat.secret})
    if isinstance(seat, Following):
        # The student's token too: their page's script asks for their question and sends their
        # answers with it (explorer.ui.workshop_round); it answers as them and reads nothing else.
        seat_of = {"code": seat.seat.code, "role": "student", "following": seat.following, "token": seat.seat.token}
        return as_json(seat_of)
    return ""


def links(st: ExplorerState) -> Updates:
    """The teacher's two links as query strings (the page's script puts its address before them)."""
    seat = teacher(st)
    return {
        "workshop_student_link": f"?workshop={seat.code}",
        # The secret after "#": a browser never sends it (no request, no Referer, no server log).
        "workshop_teacher_link": f"?workshop={seat.code}#teacher={seat.secret}",
    }


def room_code_html(code: str) -> str:
    """The room code as the projector shows it: large, monospace, letter-spaced (page.css)."""
    return f'<p class="room-code-label">Room code</p><p class="room-code" translate="no">{html.escape(code)}</p>'


def teacher_info(st: ExplorerState) -> str:
    seat = teacher(st)
    roll = store().roll(seat.code, seat.secret)
    locked, seats = store().settings(seat.code, seat.secret)
    named = sorted({as_text(name) for name in roll if name})
    anonymous = sum(1 for name in roll if not name)
    who = ", ".join(named + ([f"{anonymous} anonymous"] if anonymous else [])) or "nobody yet"
    # The lesson the class sees now (the teacher may have opened another since starting).
    number = st.lesson.number if isinstance(st.lesson, LessonAt) else seat.lesson
    title = next((lesson.title for lesson in LESSONS if lesson.number == number), "")
    return (
        f"**Workshop {seat.code}** on lesson {number}, *{as_text(title)}*. Students open this page, press "
        f"**Join or run a workshop** under the title and type the room code **{seat.code}**, "
        "or open the student link.\n\n"
        f"**{len(roll)} joined:** {who}."
        + (" **Closed to new students.**" if locked else f" At most {seats} from one network.")
    )


def teacher_views(st: ExplorerState) -> Updates:
    seat = teacher(st)
    tally = store().tally(seat.code, seat.secret)
    seated = [(f"{number}. {name or 'anonymous'}", number) for number, name in store().seats(seat.code, seat.secret)]
    pick = {"workshop_remove_pick": gr.Dropdown(choices=seated)}  # (names as a list's text: never markup)
    if tally is None:
        return pick | {
            "answer_cover": answer_cover.teacher_cover(st, None),
            "workshop_chart": gr.Plot(value=None, visible=False),
            "workshop_tally": "No question asked yet: open a lesson step and press **Ask this step's question**, "
            "or **Ask: what token comes next?** at any step.",
        }  # fmt: skip
    lines = [f"**Question {tally.number}** ({tally.title}): {tally.question}"]  # the lesson's own words
    lines.append(f"{tally.answered} of {tally.students} students answered.")
    if tally.revealed:
        share = tally.share_right
        right = "nobody answered" if share is None else f"{share:.0%} of the class was right before the reveal"
        lines.append(f"Revealed: **{as_text(tally.answer)}**. {right}.")
    if tally.first_vote is not None:
        lines.append(f"The first vote on this question: {tally.first_vote:.0%} right.")
    if seat.note[0] == tally.id:
        lines.append(seat.note[1])
    chart = shown_plot(st, tally_figure(tally), "workshop-answers")
    return pick | {
        "workshop_chart": gr.Plot(value=chart, visible=True), "workshop_tally": "\n\n".join(lines),
        "answer_cover": answer_cover.teacher_cover(st, tally),
    }  # fmt: skip


def student_views(st: ExplorerState) -> Updates:
    seat = student(st)
    who = f"as **{as_text(seat.seat.name)}**" if seat.seat.name else "anonymously"
    where = (
        "You follow the teacher's view: untick **Follow the teacher** to explore on your own."
        if seat.following
        else "You are exploring on your own: **Back to where the teacher is** returns you to the teacher's view."
    )
    return {
        "workshop_info": f"You are in workshop **{seat.seat.code}** {who}. {where}",
        "workshop_follow": seat.following,
        "workshop_live": live_value(seat),
        "workshop_seat": kept_seat(seat),  # whether they follow, kept for a reload
        "workshop_focus": seat.following,  # a student's page while they follow; the whole explorer when not
    }


NO_LINK = str.maketrans({":": "&#58;", ".": "&#46;", "@": "&#64;", "/": "&#47;"})


def as_text(text: str) -> str:
    """Text a browser sent (a name, a typed guess) or a token, shown as text in Gradio's Markdown:
    markup escaped for HTML, then Markdown's own marks escaped, and what would make a link of it
    (``https://``, ``www.``, ``a@b.c``: Gradio's Markdown links those by itself) as character
    references, which the browser shows as the characters and no linker reads."""
    return workshop_round.as_text(html.escape(text, quote=False)).replace("\\.", ".").translate(NO_LINK)
