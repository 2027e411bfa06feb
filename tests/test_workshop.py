"""Workshops in the database (issue 30): who may do what, the limits, expiry, the CSV, a restart,
thirty answers at once. Every test runs on SQLite and, where Debian's PostgreSQL is installed, on
a real PostgreSQL server started for the suite (tests/postgres.py); else those are skipped with
the reason printed."""

from __future__ import annotations

import csv
import html
import io
import threading

import pytest
import sqlalchemy as sa

import explorer
from explorer.tokens import visible
from explorer.workshop import Limits, Question, WorkshopError, Workshops, connect, database, room_code
from explorer.workshop.questions import next_token_question
from explorer.workshop.rules import SeatGone
from tests import postgres

LESSON_Q = Question("lesson", "Lesson 3, step 1", "Will the token change?", ["the same token", "another token"],
                    "the same token", "The cache holds the same numbers.")  # fmt: skip
NEXT_Q = Question("next-token", "Next token", "What comes next?", ["·Paris", "·the", "⏎"], "·Paris", "Most probable.",
                  {"·Paris": 0.5, "·the": 0.2, "⏎": 0.1})  # fmt: skip
TABLES = ("workshops", "students", "rounds", "answers", "answer_log", "downloads", "join_attempts")


class Clock:
    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="session")
def postgres_url():
    reason = postgres.why_not()
    if reason:
        pytest.skip(reason)
    with postgres.running_postgres() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'workshops.sqlite3'}"
    pg = request.getfixturevalue("postgres_url")
    engine = sa.create_engine(pg)
    database.metadata.drop_all(engine)  # each test on empty tables
    engine.dispose()
    return pg


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def ws(url, clock):
    engine = connect(url)
    yield Workshops(engine, Limits(), clock)
    engine.dispose()


def rows(ws: Workshops) -> dict[str, int]:
    with ws.engine.connect() as db:
        return {
            name: db.scalar(sa.select(sa.func.count()).select_from(database.metadata.tables[name])) for name in TABLES
        }


# ---------------------------------------------------------------- the teacher's secret
def test_only_the_teachers_secret_leads_asks_reveals_and_reads(ws):
    started = ws.start(3)
    seat = ws.join(started.code, "Ada", "10.0.0.1")
    round_id = ws.pose(started.code, started.secret, LESSON_Q)
    ws.answer(seat, round_id, "another token")
    last_changed = started.secret[:-1] + ("y" if started.secret.endswith("x") else "x")  # (one in ~60 ends in "x")
    forged = [None, "", last_changed, started.secret.upper(), seat.token, 12345, ["a"]]
    actions = [
        lambda s: ws.lead(started.code, s, {"x": 1}), lambda s: ws.pose(started.code, s, LESSON_Q),
        lambda s: ws.reveal(started.code, s), lambda s: ws.tally(started.code, s),
        lambda s: ws.answers_csv(started.code, s), lambda s: ws.ask_again(started.code, s),
        lambda s: ws.roll(started.code, s), lambda s: ws.end(started.code, s),
        lambda s: ws.check_teacher(started.code, s),
    ]  # fmt: skip
    for action in actions:
        for secret in forged:
            with pytest.raises(WorkshopError, match="Only the teacher"):
                action(secret)
    # Nothing changed: the question is open, the answer there, the view not led.
    pulse = ws.pulse(started.code)
    assert (pulse.version, pulse.asked) == (0, 1) and ws.led_view(started.code)[1] == {}
    assert ws.student_round(seat).revealed is False and ws.student_round(seat).mine == "another token"
    # The secret itself is not in the database: only its hash.
    with ws.engine.connect() as db:
        stored = db.execute(sa.select(database.workshops)).one()
    assert started.secret not in str(tuple(stored)) and stored.teacher_hash != started.secret


def test_a_student_sees_no_answer_before_the_reveal_and_their_own_after(ws):
    started = ws.start(3)
    ada, bo = ws.join(started.code, "Ada", "a"), ws.join(started.code, "", "a")
    round_id = ws.pose(started.code, started.secret, LESSON_Q)
    ws.answer(ada, round_id, "the same token")
    before = ws.student_round(bo)
    assert before.answer is None and before.why is None and before.mine is None and before.right is None
    ws.reveal(started.code, started.secret)
    assert ws.student_round(ada).right is True and ws.student_round(ada).why == LESSON_Q.why
    assert ws.student_round(bo).right is None and ws.student_round(bo).answer == "the same token"


# ---------------------------------------------------------------- answers
def test_one_answer_per_student_the_last_counts_until_the_reveal(ws):
    started = ws.start(1)
    seats = [ws.join(started.code, f"s{i}", "a") for i in range(3)]
    round_id = ws.pose(started.code, started.secret, LESSON_Q)
    ws.answer(seats[0], round_id, "another token")
    ws.answer(seats[0], round_id, "the same token")  # changed their mind
    ws.answer(seats[1], round_id, "another token")
    tally = ws.tally(started.code, started.secret)
    assert tally.counts == {"the same token": 1, "another token": 1} and tally.answered == 2 and tally.students == 3
    ws.reveal(started.code, started.secret)
    with pytest.raises(WorkshopError, match="revealed already"):
        ws.answer(seats[2], round_id, "the same token")
    with pytest.raises(WorkshopError, match="revealed already"):
        ws.answer(seats[0], round_id, "another token")
    assert ws.tally(started.code, started.secret).share_right == 0.5
    assert rows(ws)["answers"] == 2


def test_answers_are_checked_against_the_question(ws):
    started = ws.start(1)
    seat = ws.join(started.code, "", "a")
    lesson_round = ws.pose(started.code, started.secret, LESSON_Q)
    for bad in ("maybe", "", None, 3, ["the same token"], "the same token " * 3):
        with pytest.raises(WorkshopError, match="Choose one of the answers"):
            ws.answer(seat, lesson_round, bad)
    next_round = ws.pose(started.code, started.secret, NEXT_Q)
    with pytest.raises(WorkshopError, match="closed"):
        ws.answer(seat, lesson_round, "the same token")  # no longer the open question
    with pytest.raises(WorkshopError, match="closed"):
        ws.answer(seat, next_round + 1000, "·Paris")
    # A typed guess: the candidate it spells is that candidate; another word is kept as typed.
    assert ws.answer(seat, next_round, " Paris") == "·Paris"
    assert ws.answer(seat, next_round, "London") == "London"
    for bad in ("", "   ", "x" * 41, "a\x00b", "\u200b"):
        with pytest.raises(WorkshopError):
            ws.answer(seat, next_round, bad)
    assert ws.tally(started.code, started.secret).counts == {"·Paris": 0, "·the": 0, "⏎": 0, "London": 1}


def test_a_student_cannot_answer_in_another_workshop(ws):
    one, two = ws.start(1), ws.start(2)
    seat = ws.join(one.code, "", "a")
    other_round = ws.pose(two.code, two.secret, LESSON_Q)
    ws.pose(one.code, one.secret, LESSON_Q)
    with pytest.raises(WorkshopError, match="closed"):
        ws.answer(seat, other_round, "the same token")
    assert ws.tally(two.code, two.secret).answered == 0


def test_thirty_students_answer_at_once_none_lost_none_doubled(ws):
    started = ws.start(1)
    ws.allow_seats_per_address(started.code, started.secret, 30)  # a class behind one school router
    seats = [ws.join(started.code, f"student {i}", "school") for i in range(30)]
    round_id = ws.pose(started.code, started.secret, NEXT_Q)
    errors = []

    def answer_twice(i):
        try:
            ws.answer(seats[i], round_id, NEXT_Q.options[i % 3])
            ws.answer(seats[i], round_id, NEXT_Q.options[(i + 1) % 3])  # the last counts
        except Exception as error:  # every failure is reported below
            errors.append(error)

    threads = [threading.Thread(target=answer_twice, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    tally = ws.tally(started.code, started.secret)
    assert tally.answered == 30 and rows(ws)["answers"] == 30
    assert tally.counts == {option: 10 for option in NEXT_Q.options}
    assert ws.pulse(started.code).answered == 30


# ---------------------------------------------------------------- limits
def test_room_codes_names_and_limits(url, clock):
    engine = connect(url)
    ws = Workshops(engine, Limits(workshops=2, students=2, joins_per_minute=3), clock)
    started = ws.start(1)
    for bad in ("", "K7PQ2", "K7PQ2MM", "K7PQ0M", "<script>", None, 7, "x" * 100):
        with pytest.raises(WorkshopError, match="room code"):
            ws.join(bad, "", "elsewhere")
    assert ws.join(f" {started.code.lower()[:3]}-{started.code.lower()[3:]} ", "", "a").code == started.code
    assert room_code(f"{started.code}/") == room_code(f"{started.code}.") == started.code  # copied from a link
    for bad in ("x" * 33, "a\nb", "a\u202eb", 5):
        with pytest.raises(WorkshopError):
            ws.join(started.code, bad, "b")
    ws.join(started.code, "  Ada  ", "c")
    with pytest.raises(WorkshopError, match="is full"):
        ws.join(started.code, "", "c")
    with pytest.raises(WorkshopError, match="is full"):
        ws.join(started.code, "", "c")
    with pytest.raises(WorkshopError, match="Too many joins"):
        ws.join(started.code, "", "c")  # the fourth attempt from "c" this minute (refused ones count)
    clock.now += 61
    with pytest.raises(WorkshopError, match="is full"):  # a minute later the address may try again
        ws.join(started.code, "", "c")
    ws.start(2)
    with pytest.raises(WorkshopError, match="its most"):
        ws.start(3)
    assert ws.roll(started.code, started.secret) == ["", "Ada"]
    engine.dispose()


def test_a_seat_is_found_again_only_with_its_token(ws):
    started = ws.start(1)
    seat = ws.join(started.code, "Ada", "a")
    assert ws.seat(started.code, seat.token) == seat
    for bad in ("", seat.token[:-1], None, 5, "x" * 500):
        with pytest.raises(WorkshopError):
            ws.seat(started.code, bad)
    other = ws.start(2)
    with pytest.raises(WorkshopError, match="not in workshop"):
        ws.seat(other.code, seat.token)


# ---------------------------------------------------------------- expiry, the end, a restart
def test_an_expired_workshop_is_gone_from_the_database(url, clock):
    engine = connect(url)
    ws = Workshops(engine, Limits(hours=2), clock)
    old, kept = ws.start(1), None
    seat = ws.join(old.code, "Ada", "a")
    ws.answer(seat, ws.pose(old.code, old.secret, LESSON_Q), "another token")
    clock.now += 3600
    kept = ws.start(2)
    clock.now += 3601  # the first is past its two hours, the second is not
    assert ws.pulse(old.code) is None  # gone for everyone at once, before the purge deletes it
    with pytest.raises(WorkshopError, match="no workshop"):
        ws.student_round(seat)
    with pytest.raises(WorkshopError, match="no workshop"):
        ws.join(old.code, "late", "b")  # a join deletes what expired first
    assert ws.purge() == 0
    assert rows(ws) == {"workshops": 1, "students": 0, "rounds": 0, "answers": 0, "answer_log": 0, "downloads": 0,
                        "join_attempts": 1}  # the late one  # fmt: skip
    assert ws.pulse(kept.code) is not None
    engine.dispose()


def test_ending_a_workshop_deletes_it_with_its_answers(ws):
    started = ws.start(1)
    seat = ws.join(started.code, "", "a")
    ws.answer(seat, ws.pose(started.code, started.secret, LESSON_Q), "another token")
    ws.end(started.code, started.secret)
    assert {k: v for k, v in rows(ws).items() if k != "join_attempts"} == dict.fromkeys(TABLES[:-1], 0)


def test_a_restart_loses_no_workshop_and_no_answer(url, clock):
    engine = connect(url)
    first = Workshops(engine, Limits(), clock)
    started = first.start(4)
    seat = first.join(started.code, "Ada", "a")
    first.lead(started.code, started.secret, {"session": {"text": "x"}, "lesson": [4, 0]})
    first.answer(seat, first.pose(started.code, started.secret, LESSON_Q), "the same token")
    engine.dispose()  # the process ends
    again = Workshops(connect(url), Limits(), clock)
    assert again.seat(started.code, seat.token) == seat
    assert again.led_view(started.code) == (1, {"session": {"text": "x"}, "lesson": [4, 0]})
    assert again.tally(started.code, started.secret).counts == {"the same token": 1, "another token": 0}
    again.engine.dispose()


# ---------------------------------------------------------------- the CSV and asking again
def test_the_csv_holds_exactly_the_answers_given(ws, clock):
    started = ws.start(3)
    ada, formula = ws.join(started.code, "Ada", "a"), ws.join(started.code, "=HYPERLINK(1)", "a")
    first = ws.pose(started.code, started.secret, NEXT_Q)
    ws.answer(ada, first, "·the")
    ws.answer(formula, first, "-1+1")
    ws.reveal(started.code, started.secret)
    clock.now += 30
    second = ws.ask_again(started.code, started.secret)
    ws.answer(ada, second, "·Paris")
    tally = ws.tally(started.code, started.secret)
    assert tally.first_vote == 0.0 and tally.share_right == 1.0
    table = list(csv.DictReader(io.StringIO(ws.answers_csv(started.code, started.secret))))
    got = [(r["round"], r["asked_again_of"], r["student"], r["name"], r["answer"], r["right"]) for r in table]
    assert got == [
        ("1", "", "1", "Ada", "·the", "no"), ("1", "", "2", "'=HYPERLINK(1)", "'-1+1", "no"),
        ("2", "1", "1", "Ada", "·Paris", "yes"),
    ]  # fmt: skip
    assert ws.answers_csv(started.code, started.secret).startswith('"workshop","round"')  # every cell quoted


def test_sqlite_is_in_wal_mode(tmp_path):
    engine = connect(f"sqlite:///{tmp_path / 'w.sqlite3'}")
    with engine.connect() as db:
        assert db.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert db.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


def test_the_default_database_is_a_file_under_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("DECODER_EXPLORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(database.DATABASE_URL_ENV, raising=False)
    assert database.default_url() == f"sqlite:///{tmp_path / 'cache' / 'workshops.sqlite3'}"
    monkeypatch.setenv(database.DATABASE_URL_ENV, "postgresql+psycopg://u@h/db")
    assert database.default_url() == "postgresql+psycopg://u@h/db"


def test_limits_from_the_environment(monkeypatch):
    monkeypatch.setenv("DECODER_EXPLORER_WORKSHOP_HOURS", "0.5")
    monkeypatch.setenv("DECODER_EXPLORER_MAX_STUDENTS", "40")
    assert Limits.from_env() == Limits(students=40, hours=0.5)
    monkeypatch.setenv("DECODER_EXPLORER_WORKSHOP_HOURS", "soon")
    with pytest.raises(ValueError, match="must be a number"):
        Limits.from_env()


# ---------------------------------------------------------------- questions from the live model
def test_what_comes_next_is_the_models_candidates_and_its_top_token(checkpoints):
    session = explorer.GenerationSession(explorer.load_model(str(checkpoints["llama"])), "one two three")
    question = next_token_question(session)
    top = session.top_candidates(6)
    assert question.options == sorted(question.options) and len(question.options) <= 6
    assert question.answer in question.options and question.probabilities[question.answer] == pytest.approx(
        top[0].probability, abs=1e-6
    )
    assert abs(sum(question.probabilities.values()) - sum(t.probability for t in top)) < 1e-4
    assert session.step().token_id == top[0].token_id  # greedy takes the answer


def test_what_comes_next_names_the_last_token_plainly(checkpoints):
    """Fresh eyes read "likeliest after …'·is'?": an ellipsis, then a Python repr. The question
    names the text's last token in plain quotes."""
    session = explorer.GenerationSession(explorer.load_model(str(checkpoints["llama"])), "one two three")
    last = visible(session.token_texts()[-1])
    question = next_token_question(session).question
    assert question.startswith(f"Which token does the model find likeliest after the last token, “{last}”? ")
    assert "…" not in question and "'" not in question


# ---------------------------------------------------------------- the page's events, on the server
@pytest.fixture
def page_store(ws, monkeypatch):
    from explorer.ui import workshop_events

    monkeypatch.setattr(workshop_events, "_store", ws)
    return ws


def tab_with_session(checkpoints, seat=None):
    from explorer.present.views import ExplorerState

    st = ExplorerState("tiny-llama")
    st.session = explorer.GenerationSession(explorer.load_model(str(checkpoints["llama"])), "one two three")
    st.workshop = seat
    return st


def test_a_students_tab_cannot_act_as_the_teacher(page_store, checkpoints):
    from explorer.present.workshop_seats import Following
    from explorer.ui import workshop_events

    started = page_store.start(1)
    seat = page_store.join(started.code, "", "a")
    page_store.pose(started.code, started.secret, LESSON_Q)
    st = tab_with_session(checkpoints, Following(seat))
    for event in (workshop_events.on_ask, workshop_events.on_again):
        assert event(None, st) == {"__type__": "update"}  # refused with a warning: nothing changes
    for event in (workshop_events.on_ask_next, workshop_events.on_reveal):
        assert event(st) == {"__type__": "update"}
    assert event(tab_with_session(checkpoints)) == {"__type__": "update"}  # and a tab in no workshop
    tally = page_store.tally(started.code, started.secret)
    assert tally.number == 1 and not tally.revealed and page_store.pulse(started.code).asked == 1


def test_the_teachers_tab_publishes_its_view_and_a_student_who_moves_away_stops_following(page_store, checkpoints):
    from explorer.present.workshop_seats import Following, Leading
    from explorer.ui import workshop_events
    from explorer.ui.panels.workshop import after_event
    from explorer.ui.shown import kept_value

    started = page_store.start(1)
    teacher = tab_with_session(checkpoints, Leading(started.code, started.secret, 1))
    teacher.session.step()
    after_event((teacher,), {"kept": kept_value(teacher)})
    version, view = page_store.led_view(started.code)
    assert version == 1 and view["session"]["generated"] == teacher.session.generated_ids
    after_event((teacher,), {"kept": kept_value(teacher)})  # the same view: not written again
    assert page_store.led_view(started.code)[0] == 1

    student = tab_with_session(checkpoints, Following(page_store.join(started.code, "", "a")))
    student.workshop.applied = workshop_events.as_json(kept_value(student))
    after_event((student,), {"kept": kept_value(student)})
    assert student.workshop.following  # its view is still the one it took
    student.session.step()
    after_event((student,), {"kept": kept_value(student)})
    assert not student.workshop.following and page_store.led_view(started.code)[0] == 1  # and it led nothing


def test_a_followers_session_catches_up_by_the_tokens_it_lacks(page_store, checkpoints):
    from explorer.analysis import snapshot
    from explorer.ui import workshop_events

    teacher, student = tab_with_session(checkpoints), tab_with_session(checkpoints)
    for _ in range(3):
        teacher.session.step()
    student.session.step()
    student.session.force(7)  # a branch of its own: undone, then the teacher's tokens run
    mine = student.session
    caught = workshop_events.caught_up(student, snapshot.snapshot_of("tiny-llama", teacher.session))
    assert caught is mine and caught.token_ids == teacher.session.token_ids
    assert not any(step.forced for step in caught.steps)
    other_text = explorer.GenerationSession(teacher.session.loaded, "another text")
    assert workshop_events.caught_up(student, snapshot.snapshot_of("tiny-llama", other_text)) is None


def test_a_follower_takes_the_teachers_step_as_its_views_only(page_store, checkpoints, monkeypatch):
    """A follower's page that shows the teacher's model and settings already gets, at each of the
    teacher's steps, the step's views and the view's layer, head and tab: the same state and views
    as the whole update (``show_session``), without the model's and the settings' updates (their
    components cost the server more Python than the views, thirty followers at every step)."""
    from types import SimpleNamespace

    from explorer.present.workshop_seats import Following, Leading
    from explorer.ui import workshop_events
    from explorer.ui.panels.workshop import after_event
    from explorer.ui.shown import kept_value

    request = SimpleNamespace(session_hash="a follower")
    started = page_store.start(1)
    teacher = tab_with_session(checkpoints, Leading(started.code, started.secret, 1))
    after_event((teacher,), {"kept": kept_value(teacher)})
    light, whole = (tab_with_session(checkpoints, Following(page_store.join(started.code, "", n))) for n in "ab")
    for st in (light, whole):
        workshop_events.on_follow_sync(request, st)
    teacher.session.step()
    teacher.layer, teacher.head, teacher.tab = 1, "0", "lens"
    after_event((teacher,), {"kept": kept_value(teacher)})

    took = workshop_events.on_follow_sync(request, light)
    with monkeypatch.context() as patch:
        patch.setattr(workshop_events, "shows_settings_of", lambda st, snap: False)
        took_whole = workshop_events.on_follow_sync(request, whole)
    view = ("layer", "head", "query", "tab")
    assert [getattr(light, name) for name in view] == [getattr(whole, name) for name in view] == [1, "0", None, "lens"]
    assert light.session.token_ids == whole.session.token_ids == teacher.session.token_ids
    for name in ("strip", "status", "candidates", "kept", "cache_info"):
        assert took[name] == took_whole[name], name
    assert took["layer"] == 1 and took["head"] == "0" and took["tabs"].selected == "lens"
    assert not {"model_info", "text", "temperature", "seed", "chat"} & took.keys()

    # A follower whose page shows other settings (its own temperature) gets the whole update.
    s = light.session.sampling
    light.session.set_sampling(0.5, s.top_k, s.top_p, s.seed)
    teacher.session.step()
    after_event((teacher,), {"kept": kept_value(teacher)})
    took = workshop_events.on_follow_sync(request, light)
    assert took["temperature"] == teacher.session.sampling.temperature and "model_info" in took


def test_names_and_guesses_are_shown_as_text():
    from explorer.ui.workshop_events import as_text

    shown = as_text("<img src=x onerror=alert(1)>*Bo*_[x](y)")
    assert "<" not in shown and "&lt;img" in shown and "\\*Bo\\*" in shown and "\\[x\\]\\(y\\)" in shown
    for address in ("https://evil.example/x", "www.evil.example", "mail@evil.example"):  # issue 40, item 12
        linked = as_text(address)
        assert not any(mark in linked for mark in ("://", "www.", "@", ".example"))  # nothing a linker reads
        assert html.unescape(linked.replace("\\", "")) == address  # the browser shows the characters


@pytest.mark.parametrize(("kept_following", "follows"), [(False, False), (True, True), ("no", True), (None, True)])
def test_a_reload_keeps_a_student_exploring_on_their_own(page_store, checkpoints, kept_following, follows):
    """The kept seat says whether the student followed; only a literal False (it is untrusted
    input) leaves them on their own, with the session their browser restored."""
    from explorer.present.workshop_seats import Following, kept_seat
    from explorer.ui import workshop_events

    started = page_store.start(1)
    seat = page_store.join(started.code, "", "a")
    exploring = Following(seat, following=False)
    assert kept_seat(exploring)["following"] is False  # written with every student panel
    kept = {**kept_seat(exploring), "following": kept_following}
    st = tab_with_session(checkpoints)
    own = list(st.session.token_ids)
    out = workshop_events.resumed(None, st, kept)
    assert st.workshop.following is follows and out["workshop_follow"] is follows
    assert st.session.token_ids == own and out["workshop_seat"]["following"] is follows


def test_the_teachers_chart_shows_a_typed_guess_as_text(ws):
    """Plotly reads labels as a little HTML: a student's "<b>Paris" must not make a bold label."""
    from explorer.viz.workshop import tally_figure

    started = ws.start(3)
    round_id = ws.pose(started.code, started.secret, NEXT_Q)
    ws.answer(ws.join(started.code, "", "a"), round_id, "<b>Paris")
    ws.answer(ws.join(started.code, "", "b"), round_id, "·Paris")
    ws.reveal(started.code, started.secret)  # (the model's probabilities are drawn from the reveal on)
    figure = tally_figure(ws.tally(started.code, started.secret))
    labels = figure["data"][0]["y"]
    assert "&lt;b&gt;Paris" in labels and not any("<" in label for label in labels)
    assert figure["data"][1]["y"] == labels and sum(map(int, figure["data"][0]["text"])) == 2


def test_the_revealed_chart_names_the_answer_even_when_no_one_chose_it(ws):
    """A right answer nobody chose has a bar of length 0: the title said "green is right" over a
    chart with no green. It names the answer, and says when no one chose it."""
    from explorer.viz.labels import as_plotly_text
    from explorer.viz.workshop import tally_figure

    started = ws.start(3)
    round_id = ws.pose(started.code, started.secret, NEXT_Q)
    answer = ws.tally(started.code, started.secret).answer
    wrong = next(o for o in NEXT_Q.options if o != answer)
    ws.answer(ws.join(started.code, "", "a"), round_id, wrong)
    ws.reveal(started.code, started.secret)
    title = tally_figure(ws.tally(started.code, started.secret))["layout"]["title"]["text"]
    assert f"the answer: {as_plotly_text(answer)}, chosen by no one" in title and "green" not in title

    round_id = ws.pose(started.code, started.secret, NEXT_Q)
    ws.answer(ws.join(started.code, "", "b"), round_id, answer)
    ws.reveal(started.code, started.secret)
    title = tally_figure(ws.tally(started.code, started.secret))["layout"]["title"]["text"]
    assert f"the answer: {as_plotly_text(answer)} (green)" in title


def test_a_following_student_reads_the_lesson_step_the_teacher_is_on():
    """The Lessons panel of a student who follows: the teacher's step (its question comes in the
    Workshop panel); the lessons' introduction when the view names no step, or one that does not
    exist (the stored view is read as untrusted)."""
    from explorer import lessons
    from explorer.ui import texts
    from explorer.ui.workshop_events import led_lesson_text

    shown = led_lesson_text([3, 1])
    step = lessons.step_of(3, 1)
    assert shown.startswith(f"**Lesson 3, step 2 of {len(lessons.lesson(3).steps)}: {step.title}**")
    assert step.text in shown and "Workshop panel" in shown
    assert step.question not in shown  # asked by the teacher, not before
    for at in (None, [3], [3, 99], [99, 0], ["3", "1"], [True, 0], {"lesson": 3}):
        assert led_lesson_text(at) == texts.LESSONS


# ---------------------------------------------------------------- issue 40: what a stranger can do
def test_one_address_holds_a_few_live_workshops_and_an_operator_ends_any(url, clock, monkeypatch, capsys):
    """Item 7: one tab started 100 workshops and took every slot for a day."""
    engine = connect(url)
    ws = Workshops(engine, Limits(workshops=10, workshops_per_client=3), clock)
    mine = [ws.start(1, owner="203.0.113.7") for _ in range(3)]
    with pytest.raises(WorkshopError, match="Your network already runs 3 workshops"):
        ws.start(1, owner="203.0.113.7")
    other = ws.start(2, owner="198.51.100.2")  # another teacher is not held back by it
    ws.end(mine[0].code, mine[0].secret)  # the teacher ends one of theirs (their teacher link opens it)...
    ws.start(1, owner="203.0.113.7")  # ...and may start another
    # The operator: the command lists the live ones and ends any, without the teacher's secret.
    monkeypatch.setenv(database.DATABASE_URL_ENV, url)
    from explorer.workshop.__main__ import main

    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert "4 live workshops" in listed and other.code in listed and "198.51.100.2" in listed
    assert main(["end", other.code.lower()]) == 0
    assert f"Workshop {other.code} ended" in capsys.readouterr().out
    assert ws.pulse(other.code) is None
    assert main(["end", other.code]) == 1 and "There is no workshop" in capsys.readouterr().err
    assert main(["end", "not a code"]) == 2 and "is not a room code" in capsys.readouterr().err
    engine.dispose()


def test_the_operators_command_runs_as_documented(tmp_path):
    """``python -m explorer.workshop end CODE`` (docs/serving.md), in a process of its own."""
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'workshops.sqlite3'}"
    engine = connect(url)
    started = Workshops(engine, Limits()).start(1, owner="10.0.0.1")
    env = {"DECODER_EXPLORER_DATABASE_URL": url, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "explorer.workshop", "end", started.code], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert Workshops(engine, Limits()).pulse(started.code) is None
    engine.dispose()


def test_a_teacher_locks_the_workshop_and_removes_a_seat(ws):
    """Item 9: anyone with the code filled the class, and the teacher could remove nobody."""
    started = ws.start(1)
    ada, intruder = ws.join(started.code, "Ada", "10.0.0.1"), ws.join(started.code, "spam", "10.0.0.66")
    round_id = ws.pose(started.code, started.secret, LESSON_Q)
    ws.answer(intruder, round_id, "another token")
    asked = ws.pulse(started.code).asked
    ws.remove(started.code, started.secret, 2)  # numbered as in the roll and the CSV
    with pytest.raises(SeatGone, match="Your teacher removed this seat"):  # (not "the workshop ended")
        ws.seat(started.code, intruder.token)
    assert ws.pulse(started.code).asked == asked + 1  # every student page asks again: the removed one is told
    assert ws.seats(started.code, started.secret) == [(1, "Ada")] and ws.pulse(started.code).students == 1
    assert ws.seat(started.code, ada.token) == ada  # the others stay
    assert "spam" in ws.answers_csv(started.code, started.secret)  # what they said before stays in the CSV
    for bad in (2, 9, 0, "1", True, None):
        with pytest.raises(WorkshopError, match="no such student"):
            ws.remove(started.code, started.secret, bad)
    with pytest.raises(WorkshopError, match="Only the teacher"):
        ws.remove(started.code, "forged", 1)
    ws.lock(started.code, started.secret, True)
    assert ws.settings(started.code, started.secret)[0]
    with pytest.raises(WorkshopError, match="closed to new students"):
        ws.join(started.code, "late", "10.0.0.2")
    assert ws.seat(started.code, ada.token) == ada  # a locked workshop keeps its class
    ws.lock(started.code, started.secret, False)
    ws.join(started.code, "late", "10.0.0.2")
    with pytest.raises(WorkshopError, match="Only the teacher"):
        ws.lock(started.code, ada.token, True)


def test_one_address_holds_a_few_seats_unless_the_teacher_allows_more(url, clock):
    """Item 9: 100 joins from one address filled a class; a school router needs more than a few."""
    engine = connect(url)
    ws = Workshops(engine, Limits(seats_per_address=3), clock)
    started = ws.start(1)
    seats = [ws.join(started.code, "", "198.51.100.9") for _ in range(3)]
    with pytest.raises(WorkshopError, match="already has 3 students from your network"):
        ws.join(started.code, "", "198.51.100.9")
    ws.join(started.code, "", "198.51.100.10")  # another address joins
    ws.remove(started.code, started.secret, 1)  # a removed seat frees its place
    ws.join(started.code, "", "198.51.100.9")
    assert ws.settings(started.code, started.secret) == (False, 3)
    assert ws.allow_seats_per_address(started.code, started.secret, 30) == 30
    ws.join(started.code, "", "198.51.100.9")
    for bad in (0, 101, "30", None, True, float("nan")):
        with pytest.raises(WorkshopError, match="a number from 1 to 100"):
            ws.allow_seats_per_address(started.code, started.secret, bad)
    assert len(seats) == 3
    engine.dispose()


@pytest.mark.parametrize(
    "name",
    ["Ada", "مهسا\u200cنوری", "👩\u200d💻 Kim", "👍🏽", "Zoë", "李小龙", "Ngũgĩ", "देवी\u200dका", "Łukasz", "<b>Bo</b>"],
)
def test_a_real_name_in_any_script_is_accepted(ws, name):
    """Item 12: a Persian name with ZWNJ and an emoji with ZWJ were refused."""
    started = ws.start(1)
    assert ws.join(started.code, name, "a").name == name


@pytest.mark.parametrize(
    "name",
    ["\u3164", "\u2800", "\u115f\u1160", "\uffa0", "A\u3164", "\u200b", "\u200d", "\u200cA", "A\u202eB",
     "Teacher", "teacher", "TEACHER", "Ｔｅａｃｈｅｒ", "Тeacher", "ТЕАСНЕR", "T e a c h e r", "Téacher", "Teach3r",
     "The teacher", "ᴛᴇᴀᴄʜᴇʀ"],
)  # fmt: skip
def test_an_invisible_name_or_one_posing_as_the_teacher_is_refused(ws, name):
    """Item 12: U+3164, U+2800 and look-alikes of "Teacher" were accepted."""
    started = ws.start(1)
    with pytest.raises(WorkshopError, match=r"invisible|pose as the teacher"):
        ws.join(started.code, name, "a")


@pytest.mark.parametrize(
    ("cell", "quoted"),
    [("=1+1", True), ("x;=1+1", True), ("x,=1+1", True), ("a|@SUM(1)", True), ("＝1+1", True), ("＋1", True),
     (" =1+1", True), ("\t=1", True), ("\r=1", True), ("x\n=1", True), ("-2", True), ("@x", True),
     ("Ada", False), ("·Paris", False), ("x = 1", False), ("a, b", False), ("", False)],
)  # fmt: skip
def test_every_cell_a_spreadsheet_could_read_as_a_formula_is_quoted(cell, quoted):
    """Item 12: the guard looked at the first character only (OWASP: CSV injection)."""
    from explorer.workshop import rules

    assert rules.safe_cell(cell) == ("'" + cell if quoted else cell)


def test_the_csv_has_every_answer_given_and_the_question_as_plain_text(ws, clock):
    """Item 4: a student who changed from right to wrong showed only the wrong one; **Step** was in it."""
    started = ws.start(1)
    ada = ws.join(started.code, "Ada", "a")
    question = Question("lesson", "Lesson 1, step 1", "Which token will **Step** choose, `greedy`?",
                        ["·Paris", "·the"], "·Paris", "Most probable.")  # fmt: skip
    round_id = ws.pose(started.code, started.secret, question)
    ws.answer(ada, round_id, "·Paris")
    clock.now += 5
    ws.answer(ada, round_id, "·the")  # right, then wrong: both are answers given
    table = list(csv.DictReader(io.StringIO(ws.answers_csv(started.code, started.secret))))
    assert [(r["answer"], r["right"]) for r in table] == [("·Paris", "yes"), ("·the", "no")]
    assert {r["question"] for r in table} == {"Which token will Step choose, greedy?"}
    assert ws.tally(started.code, started.secret).counts == {"·Paris": 0, "·the": 1}  # the last one counts


def test_the_csv_opens_once_by_a_ticket_and_never_after_the_end(ws, clock):
    """Items 4 and 13: an old download link stayed (old rows), and still downloaded after the end."""
    started = ws.start(1)
    ada = ws.join(started.code, "Ada", "a")
    ws.answer(ada, ws.pose(started.code, started.secret, LESSON_Q), "another token")
    with pytest.raises(WorkshopError, match="Only the teacher"):
        ws.download_ticket(started.code, ada.token)
    ticket = ws.download_ticket(started.code, started.secret)
    assert "another token" in ws.download(started.code, ticket)
    with pytest.raises(WorkshopError, match="used or is too old"):
        ws.download(started.code, ticket)  # once only: a link kept is not the answers of later
    late = ws.download_ticket(started.code, started.secret)
    clock.now += 61
    with pytest.raises(WorkshopError, match="used or is too old"):
        ws.download(started.code, late)
    kept = ws.download_ticket(started.code, started.secret)
    ws.end(started.code, started.secret)
    with pytest.raises(WorkshopError, match="no workshop"):
        ws.download(started.code, kept)
    assert rows(ws)["downloads"] == 0 and rows(ws)["answer_log"] == 0


def test_an_expired_workshop_is_deleted_on_time_without_a_join(url, clock):
    """Item 13: an expired workshop's rows stayed until the next join attempt."""
    from explorer.workshop.service import purge_every

    engine = connect(url)
    ws = Workshops(engine, Limits(hours=1), clock)
    started = ws.start(1)
    ws.answer(ws.join(started.code, "Ada", "a"), ws.pose(started.code, started.secret, LESSON_Q), "another token")
    stop = purge_every(ws, 0.05)
    try:
        assert rows(ws)["workshops"] == 1
        clock.now += 3601
        for _ in range(600):  # the purge runs on its own (no join, no start): wait for it, however slow
            if rows(ws)["workshops"] == 0:
                break
            threading.Event().wait(0.05)
        assert {k: v for k, v in rows(ws).items() if k != "join_attempts"} == dict.fromkeys(TABLES[:-1], 0)
    finally:
        stop.set()
    engine.dispose()


def test_the_sqlite_file_and_its_wal_are_private(tmp_path, monkeypatch):
    """Item 13: workshops.sqlite3 and its WAL were 0644 in a 0755 folder."""
    monkeypatch.delenv(database.DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv("DECODER_EXPLORER_CACHE", str(tmp_path / "cache"))
    engine = connect(database.default_url())
    ws = Workshops(engine, Limits())
    ws.join(ws.start(1).code, "Ada", "a")
    folder = tmp_path / "cache"
    files = sorted(folder.glob("workshops.sqlite3*"))
    assert {"workshops.sqlite3", "workshops.sqlite3-wal"} <= {f.name for f in files}
    assert {f.name: oct(f.stat().st_mode & 0o777) for f in files} == {f.name: "0o600" for f in files}
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    engine.dispose()


def test_a_database_made_by_the_release_before_gets_the_new_columns(url, clock):
    """A server upgraded in place keeps its workshops: the columns issue 40 added are added."""
    engine = connect(url)
    started = Workshops(engine, Limits(), clock).start(1)
    with engine.begin() as db:
        db.exec_driver_sql("DROP INDEX IF EXISTS ix_workshops_owner")
        for table, names in database.ADDED_COLUMNS.items():
            for name in names:
                db.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {name}")
    engine.dispose()
    again = Workshops(connect(url), Limits(), clock)
    again.join(started.code, "Ada", "a")
    again.lock(started.code, started.secret, True)
    assert again.settings(started.code, started.secret) == (True, Limits().seats_per_address)
    again.engine.dispose()


def test_the_app_opens_the_workshops_and_their_purge_without_a_visitor(tmp_path, monkeypatch):
    """Item 13: after a restart, expired workshops are deleted though nobody uses a workshop."""
    from fastapi import FastAPI

    from explorer.ui import workshop_events

    monkeypatch.setenv(database.DATABASE_URL_ENV, f"sqlite:///{tmp_path / 'w.sqlite3'}")
    monkeypatch.setattr(workshop_events, "_store", None)
    monkeypatch.setattr(workshop_events, "PURGE_START_S", 0.01)
    workshop_events.add_routes(FastAPI())
    for _ in range(1200):  # however slow the machine
        if workshop_events._store is not None:
            break
        threading.Event().wait(0.05)
    assert workshop_events._store is not None  # opened by the app's own timer
    assert any(t.name == "workshop-purge" for t in threading.enumerate())
    workshop_events._store.engine.dispose()


def test_a_follower_in_the_teachers_process_shares_the_teachers_session_without_a_pass(page_store, checkpoints):
    """Issue 41: a student catching up takes a fork of the teacher's published session (its
    blocks shared, no pass of its own); stepping on their own leaves the teacher's as it was."""
    from explorer.analysis import snapshot
    from explorer.present.workshop_seats import Following, Leading
    from explorer.session import GenerationSession
    from explorer.ui import workshop_events
    from explorer.ui.panels.workshop import after_event
    from explorer.ui.shown import kept_value

    started = page_store.start(1)
    teacher = tab_with_session(checkpoints, Leading(started.code, started.secret, 1))
    for _ in range(3):
        teacher.session.step()
    after_event((teacher,), {"kept": kept_value(teacher)})
    students = [tab_with_session(checkpoints, Following(page_store.join(started.code, "", n))) for n in "abc"]
    snap = snapshot.snapshot_of("tiny-llama", teacher.session)
    passes = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GenerationSession, "pass_over", lambda *args: passes.append(args))
        caught = [workshop_events.caught_up(student, snap) for student in students]
    assert not passes  # no student ran the teacher's tokens again
    store = teacher.session.cache.store
    assert all(c.token_ids == teacher.session.token_ids and c is not teacher.session for c in caught)
    assert all(c.cache.sequence.blocks == teacher.session.cache.sequence.blocks for c in caught)  # shared
    teacher_logits = teacher.session.next_logits()
    caught[0].force(7)  # one student goes their own way: a block of their own, the teacher's untouched
    assert caught[0].cache.sequence.blocks[-1] not in teacher.session.cache.sequence.blocks
    assert store.is_shared(teacher.session.cache.sequence.blocks[0])
    assert teacher.session.token_ids == caught[1].token_ids and bool(
        (teacher.session.next_logits() == teacher_logits).all()
    )
    teacher.session.step()  # a view the students do not have yet: they catch up by replaying (nothing kept matches)
    assert (
        workshop_events.caught_up(students[1], snapshot.snapshot_of("tiny-llama", teacher.session))
        is students[1].session
    )
    workshop_events.leave(teacher)  # the teacher ends the workshop: its kept session goes
    assert workshop_events.workshop_shared.fork_for(started.code, snap) is None


def test_a_student_is_told_which_ended_their_part_the_workshop_or_their_seat(ws, monkeypatch):
    """Fresh eyes: "Workshop X has ended (or your teacher removed your place in it)" hedged what
    the database knows: a seat removed from a workshop that runs on, or the workshop gone."""
    from explorer.present.views import ExplorerState
    from explorer.present.workshop_seats import Following
    from explorer.ui import workshop_events

    monkeypatch.setattr(workshop_events, "store", lambda: ws)
    started = ws.start(1)
    ada, bo = ws.join(started.code, "Ada", "10.0.0.1"), ws.join(started.code, "Bo", "10.0.0.2")
    ws.remove(started.code, started.secret, 1)
    told = {}
    for name, seat in (("Ada", ada), ("Bo", bo)):
        st = ExplorerState("smollm2-135m-instruct")
        st.workshop = Following(seat)
        told[name] = st
    removed = workshop_events.on_sync(told["Ada"])["workshop_info"]
    said = removed.split("\n\n")[0]
    assert said.startswith(f"**Your teacher removed your place in workshop {started.code}.**")
    assert "has ended" not in said
    ws.end(started.code, started.secret)
    gone = workshop_events.on_sync(told["Bo"])["workshop_info"]
    said = gone.split("\n\n")[0]  # (then the panel's introduction, as on a fresh page)
    assert said.startswith(f"**Workshop {started.code} has ended.**") and "removed" not in said
    assert told["Ada"].workshop is None and told["Bo"].workshop is None
