"""A student's question and answers as the page's script asks for them (explorer.ui.workshop_round):
POST /workshop/round and POST /workshop/answer, on a real app with a SQLite database. What a student
sees before and after the reveal, and everything a browser may send that is refused, with the
message it gets."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from explorer.ui import workshop_gate, workshop_round
from explorer.workshop import Limits, Question, Workshops, connect

LESSON_Q = Question("lesson", "Lesson 3, step 1", "Will the **token** change?", ["the same token", "another token"],
                    "the same token", "The cache holds the same numbers.")  # fmt: skip
NEXT_Q = Question("next-token", "Next token", "What comes next?", ["·Paris", "·the", "⏎"], "·Paris", "Most probable.",
                  {"·Paris": 0.5, "·the": 0.2, "⏎": 0.1})  # fmt: skip
MARKUP = "<img src=x onerror=alert(1)>"


@pytest.fixture
def ws(tmp_path):
    engine = connect(f"sqlite:///{tmp_path / 'workshops.sqlite3'}")
    yield Workshops(engine, Limits())
    engine.dispose()


@pytest.fixture(autouse=True)
def misses(monkeypatch):
    """This test's own count of requests without a seat (the app's is one per process)."""
    monkeypatch.setattr(workshop_gate, "MISSES", workshop_gate.Misses(limit=1000))


@pytest.fixture
def client(ws):
    app = FastAPI()
    workshop_round.add_routes(app, lambda: ws)
    return TestClient(app)


@pytest.fixture
def room(ws):
    """A workshop, its teacher's secret and two students' seats."""
    started = ws.start(3)
    return started, ws.join(started.code, "Ada", "10.0.0.1"), ws.join(started.code, "", "10.0.0.2")


def ask(client, seat, path="/workshop/round", **body):
    return client.post(path, json={"code": seat.code, "token": seat.token, **body})


def test_a_student_sees_the_question_without_its_answer_then_whether_they_were_right(ws, client, room):
    started, ada, other = room
    waiting = ask(client, ada).json()
    assert waiting["round"] is None and "Wait for the teacher" in waiting["question_html"]
    ws.pose(started.code, started.secret, LESSON_Q)
    shown = ask(client, ada).json()
    assert shown["options"] == LESSON_Q.options and not shown["revealed"] and shown["mine"] is None
    assert shown["question_html"] == "<p><strong>Question 1:</strong> Will the <strong>token</strong> change?</p>\n"
    assert "same numbers" not in json.dumps(shown)  # neither the answer's why nor a verdict before the reveal
    mine = ask(client, ada, "/workshop/answer", round=shown["round"], choice="another token").json()
    assert mine["mine"] == "another token" and "Your answer: <strong>another token</strong>" in mine["result_html"]
    changed = ask(client, ada, "/workshop/answer", round=shown["round"], choice="the same token").json()
    assert changed["mine"] == "the same token"  # the last answer counts
    assert ask(client, other).json()["mine"] is None  # a student reads their own answer only
    ws.reveal(started.code, started.secret)
    right, silent = ask(client, ada).json(), ask(client, other).json()
    assert right["revealed"] and "✓ <strong>Right:</strong> the same token." in right["result_html"]
    assert "The cache holds the same numbers." in right["result_html"]
    assert "You did not answer. The answer is <strong>the same token</strong>" in silent["result_html"]
    assert ws.tally(started.code, started.secret).answered == 1


def test_a_typed_guess_is_kept_as_text_and_shown_as_text(ws, client, room):
    started, ada, other = room
    ws.pose(started.code, started.secret, NEXT_Q)
    shown = ask(client, ada).json()
    assert shown["typed"] and shown["options"] == NEXT_Q.options
    matched = ask(client, ada, "/workshop/answer", round=shown["round"], choice=None, typed=" Paris ").json()
    assert matched["mine"] == "·Paris"  # a typed guess that is one of the options becomes that option
    typed = ask(client, other, "/workshop/answer", round=shown["round"], choice="·the", typed=MARKUP).json()
    assert typed["mine"] == MARKUP  # the typed guess wins over the radio: it is what the student wrote last
    assert "<img" not in typed["result_html"] and "&lt;img src=x onerror=alert(1)&gt;" in typed["result_html"]
    ws.reveal(started.code, started.secret)
    wrong = ask(client, other).json()
    said = wrong["result_html"]
    assert "✗ <strong>Not this time:</strong> you said &lt;img" in said and "<img" not in said
    assert not wrong["typed"]


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ({}, 404, "no place in that workshop"),  # without a seat: one answer (tests/test_workshop_gate.py)
        ({"code": 7, "token": "x"}, 404, "no place in that workshop"),
        ({"token": "not-a-seat"}, 404, "no place in that workshop"),
        ({"code": "ZZZZZZ"}, 404, "no place in that workshop"),
        ({"round": "1"}, 400, "names no question"),
        ({"round": True}, 400, "names no question"),
        ({"choice": ["a"]}, 400, "An answer is text"),
        ({"choice": ""}, 409, "Choose an answer first"),
        ({"round": 999}, 409, "That question is closed"),
    ],
)  # fmt: skip
def test_what_a_browser_sends_is_checked_before_use(ws, client, room, body, status, said):
    started, ada, _ = room
    ws.pose(started.code, started.secret, LESSON_Q)
    open_round = ask(client, ada).json()["round"]
    asked = {"code": ada.code, "token": ada.token, "round": open_round, "choice": "the same token", **body}
    if not body:
        asked = {}
    refused = client.post("/workshop/answer", json=asked)
    assert refused.status_code == status and said in refused.json()["error"]
    assert ws.tally(started.code, started.secret).answered == 0


def test_a_body_that_is_not_a_small_json_object_is_refused_unread(client, room):
    _, ada, _ = room
    assert client.post("/workshop/round", content=b"[1, 2]").status_code == 400
    assert client.post("/workshop/round", content=b"{not json").status_code == 400
    huge = json.dumps({"code": ada.code, "token": ada.token, "pad": "x" * 10_000})
    assert client.post("/workshop/round", content=huge).status_code == 413

    def chunks():  # no Content-Length: read only up to the limit
        yield b'{"pad": "'
        for _ in range(1000):
            yield b"x" * 1000

    too_big = client.post("/workshop/round", content=chunks())
    assert too_big.status_code == 413 and "too large" in too_big.json()["error"]


def test_no_answer_once_revealed_and_none_from_another_workshops_seat(ws, client, room):
    started, ada, _ = room
    elsewhere = ws.start(3)
    stranger = ws.join(elsewhere.code, "", "10.0.0.9")
    ws.pose(started.code, started.secret, LESSON_Q)
    open_round = ask(client, ada).json()["round"]
    foreign = client.post("/workshop/answer", json={"code": started.code, "token": stranger.token,
                                                    "round": open_round, "choice": "another token"})  # fmt: skip
    assert foreign.status_code == 404 and "no place in that workshop" in foreign.json()["error"]
    ws.reveal(started.code, started.secret)
    late = ask(client, ada, "/workshop/answer", round=open_round, choice="the same token")
    assert late.status_code == 409 and "no open question" in late.json()["error"]
    assert ws.tally(started.code, started.secret).answered == 0


def test_a_student_answers_at_a_persons_pace(ws, client, room):
    started, ada, other = room
    ws.pose(started.code, started.secret, LESSON_Q)
    open_round = ask(client, ada).json()["round"]
    sent = [ask(client, ada, "/workshop/answer", round=open_round, choice="the same token").status_code
            for _ in range(workshop_round.ANSWER_BURST + 3)]  # fmt: skip
    assert sent[: workshop_round.ANSWER_BURST] == [200] * workshop_round.ANSWER_BURST  # a changed mind, several times
    assert set(sent[workshop_round.ANSWER_BURST :]) == {429}  # then a script is slowed down...
    assert ask(client, other, "/workshop/answer", round=open_round, choice="another token").status_code == 200
    assert ws.tally(started.code, started.secret).answered == 2  # ...and nobody else is


def test_the_pace_is_a_token_bucket_that_refills_and_forgets_the_oldest():
    from explorer.workshop import Seat

    pace = workshop_round.AnswerPace(burst=2, per_s=1000.0, remembered=4)
    seats = [Seat("ABCDEF", "t", n, "") for n in range(6)]
    for seat in seats:
        pace.check(seat)
    assert len(pace.buckets) <= 4  # bounded however many students a script pretends to be
    slow = workshop_round.AnswerPace(burst=1, per_s=0.001)
    slow.check(seats[0])
    with pytest.raises(workshop_round.Refused):
        slow.check(seats[0])


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(
    "body",
    [
        nested(1000),  # 2 KB of nested arrays: deeper than Python's JSON parser goes (a RecursionError)
        b'{"code": ' + nested(1000)[:2000] + b"}",
        b'{"round": 9223372036854775808}',  # beyond SQLite's INTEGER (an OverflowError)
        b'{"round": 18446744073709551616}',
        b'{"round": -1}',
        b'{"round": 0}',
        b'{"round": 1e400}',
        b'{"round": NaN}',
        b'{"round": ' + b"9" * 1900 + b"}",
        b'\xff\xfe{"round": 1}',  # not UTF-8
        b'{"code": "\\ud800", "token": "\\udfff"}',  # lone surrogates
    ],
)
def test_a_malformed_body_is_a_4xx_with_a_sentence_never_a_traceback(ws, client, room, body, caplog):
    """Issue 40, item 11: each of these was HTTP 500 with a traceback in the server's log."""
    started, ada, _ = room
    ws.pose(started.code, started.secret, LESSON_Q)
    seat = json.dumps({"code": ada.code, "token": ada.token, "choice": "another token"}).encode()
    for path in ("/workshop/round", "/workshop/answer"):
        sent = body if not body.startswith(b'{"round"') else seat[:-1] + b", " + body[1:]
        refused = client.post(path, content=sent, headers={"Content-Type": "application/json"})
        if path == "/workshop/round" and body.startswith(b'{"round"'):
            assert refused.status_code == 200  # a question read: the round number is not read
            continue
        assert 400 <= refused.status_code < 500, (path, refused.status_code, refused.text[:200])
        said = refused.json()["error"]
        assert said.endswith(".") and "Traceback" not in said and "Error" not in said
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL") or r.exc_info]
    assert ws.tally(started.code, started.secret).answered == 0


def test_a_removed_seats_token_stops_working(ws, client, room):
    """Issue 40, item 9: the teacher removes a seat; its token neither reads nor answers."""
    started, ada, other = room
    ws.pose(started.code, started.secret, LESSON_Q)
    open_round = ask(client, ada).json()["round"]
    ws.remove(started.code, started.secret, 1)
    for path, body in (("/workshop/round", {}), ("/workshop/answer", {"round": open_round, "choice": "another token"})):
        gone = ask(client, ada, path, **body)
        assert gone.status_code == 404 and "no place in that workshop" in gone.json()["error"]  # as any seatless
    assert ask(client, other).status_code == 200
    assert ws.tally(started.code, started.secret).answered == 0
