"""A student's question, drawn by the page's own script (static/workshop.js) instead of by Gradio events.

A class of thirty sees each question at the same moment; as Gradio events, their thirty Syncs at
the question, thirty Sends and thirty Syncs at the reveal cost ~15-25 ms of the server's Python
each, taken from everyone's Steps (bench/bench_workshop.py). These two small requests cost a
tenth of that:

- ``POST /workshop/round`` ``{"code", "token"}``: the question as this student sees it (the answer
  and why only once revealed, their own answer, whether it was right);
- ``POST /workshop/answer`` ``{"code", "token", "round", "choice", "typed"}``: keeps their answer to
  the question they see (the last one counts until the reveal), answers as ``/workshop/round``.

The token is the student's seat (``explorer.workshop.Workshops.seat``): it answers as that student
and reads nothing of anyone else. Without a seat (no such live workshop, a removed seat, a wrong
token) every request gets the same answer and counts as its address's miss (``workshop_gate``).
Every field is checked for type and size before use; the body is read up to ``MAX_BODY`` bytes.
The words (Markdown: the lesson's own, the model's tokens, what a student typed) are made into HTML
here, every untrusted piece escaped.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable

from fastapi import Request
from fastapi.responses import JSONResponse
from markdown_it import MarkdownIt
from starlette.concurrency import run_in_threadpool

from explorer.errors import as_sentence
from explorer.ui import workshop_gate
from explorer.ui.gradio_private import serve_ahead_of_gradio
from explorer.ui.workshop_gate import NO_STORE, TooManyMisses
from explorer.workshop import Seat, StudentRound, WorkshopError, Workshops
from explorer.workshop.questions import HIDING_KINDS

MAX_BODY = 2048  # bytes: a code, a token, a round number, an option and a typed guess
MAX_ROUND = 2**53  # a question's number: the database's integers (and JavaScript's) hold it
ANSWER_BURST, ANSWERS_PER_S = 5, 2.0  # one student's answers: five at once, then two a second
REFUSED = {"bad": 400, "too-big": 413, "too-fast": 429}

_markdown = MarkdownIt("commonmark", {"html": False})  # markup a student typed stays text
MARKDOWN_SPECIALS = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


# (explorer.ui.answer_cover says it to the teacher's page and a learner alone)
UNTIL_REVEALED = "Hidden until the teacher reveals the answer: it would show the token the class is predicting."


class Refused(Exception):
    """A request this module answers with an error: ``kind`` names the HTTP status (``REFUSED``)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


# ---------------------------------------------------------------- what a student sees
def round_view(shown: StudentRound | None) -> dict:
    """The question as the page draws it: the options as text (the script puts them in with
    ``textContent``), the question and the result as HTML made here. ``covers``: while a question
    asks for the next token, the sentence the page shows in place of every view that names it
    (explorer.ui.answer_cover); ``title``: the question's, which ends a lesson step's cover once revealed."""
    if shown is None:
        return {"round": None, "options": [], "mine": None, "revealed": False, "typed": False, "covers": "",
                "title": "", "question_html": html_of("Wait for the teacher's first question."),
                "result_html": ""}  # fmt: skip
    covers = shown.kind in HIDING_KINDS and not shown.revealed
    return {
        "round": shown.id, "options": shown.options, "mine": shown.mine, "revealed": shown.revealed,
        "typed": shown.kind == "next-token" and not shown.revealed, "title": shown.title,
        "covers": UNTIL_REVEALED if covers else "",
        "question_html": html_of(f"**Question {shown.number}:** {shown.question}"),  # the lesson's own words
        "result_html": html_of(result_text(shown)),
    }  # fmt: skip


def result_text(shown: StudentRound) -> str:
    """Before the reveal the student's own answer; after it, whether they were right, and why."""
    if not shown.revealed:
        mine = shown.mine
        return f"Your answer: **{as_text(mine)}** (you can change it until the reveal)." if mine else ""
    answer = as_text(shown.answer)
    if shown.mine is None:
        verdict = f"You did not answer. The answer is **{answer}**."
    elif shown.right:
        verdict = f"✓ **Right:** {answer}."
    else:
        verdict = f"✗ **Not this time:** you said {as_text(shown.mine)}; the answer is **{answer}**."
    return f"{verdict} {shown.why}"  # why: the lesson's own words


def html_of(markdown: str) -> str:
    return _markdown.render(markdown) if markdown else ""


def as_text(text: str | None) -> str:
    """A token or what a browser sent, as literal text in Markdown: its marks escaped (its HTML is
    escaped by the renderer here; ``workshop_events.as_text`` escapes it for Gradio's)."""
    return MARKDOWN_SPECIALS.sub(r"\\\1", text or "")


# ---------------------------------------------------------------- the two requests
def read_round(workshops: Workshops, asked: dict) -> dict:
    seat = seat_of(workshops, asked)
    return round_view(workshops.student_round(seat))


def send_answer(workshops: Workshops, asked: dict, pace: AnswerPace) -> dict:
    """Keep the student's answer to the question they see; the question as it is then."""
    seat = seat_of(workshops, asked)
    round_id, choice, typed = asked.get("round"), asked.get("choice"), asked.get("typed")
    if not isinstance(round_id, int) or isinstance(round_id, bool) or not 0 < round_id < MAX_ROUND:
        raise Refused("bad", "The answer names no question: reload the page.")
    if not all(value is None or isinstance(value, str) for value in (choice, typed)):
        raise Refused("bad", "An answer is text: choose one of the options, or type a token.")
    shown = workshops.student_round(seat)
    if shown is None or shown.revealed:
        raise WorkshopError("There is no open question: wait for the teacher to ask one.")
    given = typed.strip() if shown.kind == "next-token" and typed and typed.strip() else choice
    if not given:
        raise WorkshopError("Choose an answer first (or type one), then send it.")
    pace.check(seat)
    workshops.answer(seat, round_id, given)
    return round_view(workshops.student_round(seat))


class NoSeat(Exception):
    """The request names no seat: answered ``workshop_gate.no_seat()``, whatever the reason."""


def seat_of(workshops: Workshops, asked: dict) -> Seat:
    """The student's seat, or ``NoSeat``: a missing or wrong token, a code that is not a live
    workshop's, a seat removed all answer alike (``explorer.ui.workshop_gate``)."""
    code, token = asked.get("code"), asked.get("token")
    if not isinstance(code, str) or not isinstance(token, str):
        raise NoSeat()
    try:
        return workshops.seat(code, token)
    except WorkshopError as error:
        raise NoSeat() from error


class AnswerPace:
    """A student's answers at the pace of a person: a few at once (a changed mind), then at most
    ``per_s`` a second (a token bucket per student), so that a script sending thousands makes no
    more writes to the database than a person clicking."""

    def __init__(self, burst: int = ANSWER_BURST, per_s: float = ANSWERS_PER_S, remembered: int = 10_000):
        self.burst, self.per_s, self.remembered = burst, per_s, remembered
        self.buckets: dict[tuple[str, int], tuple[float, float]] = {}  # (code, student) -> (tokens, when)
        self.lock = threading.Lock()

    def check(self, seat: Seat) -> None:
        now, key = time.monotonic(), (seat.code, seat.student)
        with self.lock:
            tokens, then = self.buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - then) * self.per_s)
            if tokens < 1:
                raise Refused("too-fast", "Answers are coming too fast: wait a moment, then send yours again.")
            if len(self.buckets) >= self.remembered:  # bounded: the least recent half forgotten
                for old in sorted(self.buckets, key=lambda k: self.buckets[k][1])[: self.remembered // 2]:
                    del self.buckets[old]
            self.buckets[key] = (tokens - 1, now)


async def read_body(request: Request) -> dict:
    """The request's JSON object, read only up to ``MAX_BODY`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise Refused("too-big", "That request is too large for an answer.")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise Refused("too-big", "That request is too large for an answer.")
    try:
        asked = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested deeper than Python parses
        asked = None
    if not isinstance(asked, dict):
        raise Refused("bad", "The request is not a JSON object: reload the page.")
    return asked


async def answered(request: Request, work: Callable[[dict], dict]) -> JSONResponse:
    """``work(body)`` on a worker thread (it reads the database): its view, or the error as a
    sentence that says what to do, with a status for the page's script. A request without a seat
    gets the one answer every such request gets, and counts as a miss of its address."""
    address = workshop_gate.address_of(request)
    try:
        workshop_gate.MISSES.check(address)
        asked = await read_body(request)
        return JSONResponse(await run_in_threadpool(work, asked), headers=NO_STORE)
    except TooManyMisses:
        return workshop_gate.wait_a_minute()
    except NoSeat:
        workshop_gate.MISSES.miss(address)
        return workshop_gate.no_seat()
    except Refused as error:
        return refused(error)
    except WorkshopError as error:  # a closed question, an answer after the reveal (the seat is there)
        return JSONResponse({"error": as_sentence(error)}, status_code=409, headers=NO_STORE)


def refused(error: Refused) -> JSONResponse:
    return JSONResponse({"error": str(error)}, status_code=REFUSED[error.kind], headers=NO_STORE)


def add_routes(app, store: Callable[[], Workshops]) -> None:
    """``POST /workshop/round`` and ``POST /workshop/answer``, ahead of Gradio's own routes."""
    pace = AnswerPace()

    async def round_route(request: Request) -> JSONResponse:
        return await answered(request, lambda asked: read_round(store(), asked))

    async def answer_route(request: Request) -> JSONResponse:
        return await answered(request, lambda asked: send_answer(store(), asked, pace))

    for path, route in (("/workshop/round", round_route), ("/workshop/answer", answer_route)):
        serve_ahead_of_gradio(app, path, route, ["POST"])
