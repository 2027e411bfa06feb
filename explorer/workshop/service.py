"""A workshop: a teacher leads a lesson, the class answers its questions, and everything is kept
in the database (``explorer.workshop.database``), never in this process.

Who may do what is decided here, on the server:
- the teacher holds a secret made when the workshop starts; only its SHA-256 is stored, and a
  secret sent back is compared in constant time. Only the teacher changes what the class sees
  (the lead view, questions, the reveal) or reads the class's answers;
- a student holds a token their browser keeps (its hash is stored): it answers as that student
  and nothing else. A student reads the lead view, the open question, and their own answer.

Nothing here imports Gradio: the page (``explorer.ui.workshop_events``), the tests and the
benchmark call these methods.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import hmac
import io
import json
import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import sqlalchemy as sa

from explorer.workshop import rules
from explorer.workshop.database import answer_log, answers, downloads, join_attempts, rounds, students, workshops
from explorer.workshop.rules import CODE_LENGTH, CODE_LETTERS, Limits, SeatGone, WorkshopError

GONE = "There is no workshop {code} (it ended, or the code is mistyped): ask your teacher for the code."
log = logging.getLogger(__name__)
TICKET_S = 60.0  # a CSV download's ticket is used at once by the teacher's page
NOT_TEACHER = "Only the teacher of workshop {code} can do this: open the teacher link the workshop started with."


@dataclass(frozen=True)
class Started:
    code: str
    secret: str  # the teacher's: in the teacher link only, never shown to students


@dataclass(frozen=True)
class Seat:
    """A student in a workshop: ``token`` is what their browser keeps to answer as them."""

    code: str
    token: str
    student: int
    name: str


@dataclass(frozen=True)
class Question:
    """A question as the live model answered it (the lesson's pose, or the model's candidates)."""

    kind: str  # "lesson" | "next-token"
    title: str
    question: str
    options: list[str]
    answer: str
    why: str
    probabilities: dict[str, float] = field(default_factory=dict)  # next-token: each option's


@dataclass(frozen=True)
class Pulse:
    """What a page polls (cheap, and nothing secret): what changed since it last looked."""

    version: int  # the lead view's changes
    asked: int  # questions posed and revealed
    round: int | None
    answered: int  # answers to the open question
    students: int
    last_answer: float  # when the newest of them was sent (a changed answer changes no count)


@dataclass(frozen=True)
class StudentRound:
    """The open (or last revealed) question as one student sees it: the answer only once revealed."""

    id: int
    number: int
    kind: str
    title: str
    question: str
    options: list[str]
    mine: str | None  # this student's answer
    revealed: bool
    answer: str | None = None
    why: str | None = None

    @property
    def right(self) -> bool | None:
        if not self.revealed or self.mine is None:
            return None
        return rules.same_token(self.mine, self.answer)


@dataclass(frozen=True)
class Tally:
    """The class's answers to a question, for the teacher."""

    id: int
    number: int
    kind: str
    title: str
    question: str
    options: list[str]
    answer: str
    why: str
    counts: dict[str, int]  # each option (and each other typed guess) -> students
    answered: int
    students: int
    revealed: bool
    probabilities: dict[str, float]
    first_vote: float | None = None  # share right in the round this one asks again

    @property
    def share_right(self) -> float | None:
        return _share_right(self.counts, self.answer)

    def is_answer(self, option: str) -> bool:
        """Whether ``option`` (or a typed guess) is the right answer, as a student's answer is judged."""
        return rules.same_token(option, self.answer)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


class Workshops:
    """Every workshop on one database. ``clock`` is the time in seconds (a test moves it)."""

    def __init__(self, engine: sa.Engine, limits: Limits | None = None, clock: Callable[[], float] = time.time):
        self.engine = engine
        self.limits = limits or Limits()
        self.clock = clock

    # ------------------------------------------------------------ the teacher
    def start(self, lesson: int, owner: str = "") -> Started:
        """A new workshop on ``lesson``, with its room code and the teacher's secret. ``owner`` is
        the address it is started from: one address holds at most ``limits.workshops_per_client``."""
        now = self.clock()
        owner = str(owner)[:64]
        self.purge()
        secret = secrets.token_urlsafe(24)
        with self.engine.begin() as db:
            live = db.scalar(sa.select(sa.func.count()).select_from(workshops))
            if live >= self.limits.workshops:
                raise WorkshopError(
                    f"This server already runs {live} workshops, its most: try again when one has ended."
                )
            mine = db.scalar(sa.select(sa.func.count()).select_from(workshops).where(workshops.c.owner == owner))
            if mine >= self.limits.workshops_per_client:
                runs = f"{mine} workshop{'' if mine == 1 else 's'}"
                raise WorkshopError(
                    f"Your network already runs {runs}, the most one may: end one first (its teacher "
                    "link opens it, then End the workshop), or ask the server's operator."
                )
            for _ in range(20):  # 32^6 codes: a clash is rare, and then another code is drawn
                code = "".join(secrets.choice(CODE_LETTERS) for _ in range(CODE_LENGTH))
                if db.scalar(sa.select(workshops.c.code).where(workshops.c.code == code)) is None:
                    break
            db.execute(
                workshops.insert().values(
                    code=code, teacher_hash=digest(secret), lesson=int(lesson), created=now,
                    expires=now + self.limits.hours * 3600, lead="{}", version=0, asked=0, owner=owner, locked=False,
                )
            )  # fmt: skip
        return Started(code, secret)

    def check_teacher(self, code: str, secret: object) -> None:
        """Refuse unless ``secret`` is the teacher's (compared in constant time)."""
        code = rules.room_code(code)
        with self._reading() as db:
            stored = db.scalar(sa.select(workshops.c.teacher_hash).where(self._live(code)))
        self._teacher(code, stored, secret)

    def _teacher(self, code: str, stored: str | None, secret: object) -> None:
        if stored is None:
            raise WorkshopError(GONE.format(code=code))
        given = digest(secret) if isinstance(secret, str) else ""
        if not hmac.compare_digest(given, stored):
            raise WorkshopError(NOT_TEACHER.format(code=code))

    def lesson_of(self, code: str) -> int:
        with self._reading() as db:
            lesson = db.scalar(sa.select(workshops.c.lesson).where(self._live(rules.room_code(code))))
        if lesson is None:
            raise WorkshopError(GONE.format(code=code))
        return lesson

    def lead(self, code: str, secret: str, view: dict) -> int:
        """The teacher's page shows ``view`` now (JSON-able): students following see it. Returns the version."""
        text = json.dumps(view, sort_keys=True)
        with self.engine.begin() as db:
            row = self._locked(db, code)
            self._teacher(code, row.teacher_hash, secret)
            if row.lead == text:
                return row.version
            db.execute(workshops.update().where(workshops.c.code == code).values(lead=text, version=row.version + 1))
            return row.version + 1

    def pose(self, code: str, secret: str, question: Question, again_of: int | None = None) -> int:
        """Put ``question`` to the class (a new round); the one open before it is closed unrevealed."""
        with self.engine.begin() as db:
            row = self._locked(db, code)
            self._teacher(code, row.teacher_hash, secret)
            number = db.scalar(sa.select(sa.func.count()).select_from(rounds).where(rounds.c.workshop == code)) + 1
            round_id = db.execute(
                rounds.insert().values(
                    workshop=code, number=number, kind=question.kind, title=question.title,
                    question=question.question, options=json.dumps(question.options), answer=question.answer,
                    why=question.why, probabilities=json.dumps(question.probabilities), again_of=again_of,
                    opened=self.clock(),
                )
            ).inserted_primary_key[0]  # fmt: skip
            db.execute(
                workshops.update().where(workshops.c.code == code).values(round_id=round_id, asked=row.asked + 1)
            )
        return round_id

    def ask_again(self, code: str, secret: str) -> int:
        """The current question once more, as a new round (after the class discussed it)."""
        with self.engine.begin() as db:
            row = self._locked(db, code)
            self._teacher(code, row.teacher_hash, secret)
            last = db.execute(sa.select(rounds).where(rounds.c.id == row.round_id)).one_or_none()
        if last is None:
            raise WorkshopError("There is no question to ask again: ask one first.")
        question = Question(
            last.kind, last.title, last.question, json.loads(last.options), last.answer, last.why,
            json.loads(last.probabilities),
        )  # fmt: skip
        return self.pose(code, secret, question, again_of=last.again_of or last.id)

    def reveal(self, code: str, secret: str) -> Tally:
        """Show the class the right answer; answers sent after this are refused."""
        with self.engine.begin() as db:
            row = self._locked(db, code)
            self._teacher(code, row.teacher_hash, secret)
            if row.round_id is None:
                raise WorkshopError("There is no question to reveal: ask one first.")
            db.execute(
                rounds.update()
                .where(rounds.c.id == row.round_id, rounds.c.revealed.is_(None))
                .values(revealed=self.clock())
            )
            db.execute(workshops.update().where(workshops.c.code == code).values(asked=row.asked + 1))
        return self.tally(code, secret)

    def tally(self, code: str, secret: str) -> Tally | None:
        """The class's answers to the current question (None before any)."""
        with self._reading() as db:
            row = self._workshop(db, code)
            self._teacher(code, row.teacher_hash, secret)
            if row.round_id is None:
                return None
            question = db.execute(sa.select(rounds).where(rounds.c.id == row.round_id)).one()
            counts = self._counts(db, question)
            n_students = self._n_students(db, code)
            first = None
            if question.again_of is not None:
                earlier = db.execute(sa.select(rounds).where(rounds.c.id == question.again_of)).one()
                first = _share_right(self._counts(db, earlier), earlier.answer)
        return Tally(
            question.id, question.number, question.kind, question.title, question.question,
            json.loads(question.options), question.answer, question.why, counts, sum(counts.values()), n_students,
            question.revealed is not None, json.loads(question.probabilities), first,
        )  # fmt: skip

    def answers_csv(self, code: str, secret: str) -> str:
        """Every answer given in the workshop, one row each (a changed mind is two rows), in the order
        the rounds were asked and the answers sent."""
        with self._reading() as db:
            row = self._workshop(db, code)
            self._teacher(code, row.teacher_hash, secret)
            return self._csv(db, code)

    def download_ticket(self, code: str, secret: str) -> str:
        """A ticket that opens the answers once, within ``TICKET_S`` (the teacher's page uses it at
        once: a link with it in the address, never the teacher's secret)."""
        ticket = secrets.token_urlsafe(18)
        now = self.clock()
        with self.engine.begin() as db:
            row = self._locked(db, code)
            self._teacher(code, row.teacher_hash, secret)
            db.execute(downloads.delete().where(downloads.c.expires <= now))
            db.execute(downloads.insert().values(ticket_hash=digest(ticket), workshop=code, expires=now + TICKET_S))
        return ticket

    def download(self, code: object, ticket: object) -> str:
        """The answers' CSV for a ticket from ``download_ticket``: used once, and only while the
        workshop lives (its end deletes the tickets with it)."""
        code = rules.room_code(code)
        if not isinstance(ticket, str) or len(ticket) > 100:
            raise WorkshopError("This download link is not valid: press Download the answers again.")
        with self.engine.begin() as db:
            self._workshop(db, code)
            used = db.execute(
                downloads.delete()
                .where(downloads.c.ticket_hash == digest(ticket), downloads.c.workshop == code)
                .where(downloads.c.expires > self.clock())
                .returning(downloads.c.ticket_hash)
            ).first()  # fmt: skip
            if used is None:
                raise WorkshopError("This download link was used or is too old: press Download the answers again.")
            return self._csv(db, code)

    def _csv(self, db, code: str) -> str:
        numbers = self._student_numbers(db, code)
        given = db.execute(
            sa.select(rounds, answer_log.c.student, answer_log.c.answer.label("given"), answer_log.c.answered)
            .join(answer_log, answer_log.c.round_id == rounds.c.id)
            .where(rounds.c.workshop == code)
            .order_by(rounds.c.number, answer_log.c.answered, answer_log.c.id)
        ).all()  # fmt: skip
        names = dict(db.execute(sa.select(students.c.id, students.c.name).where(students.c.workshop == code)).all())
        numbers_of_rounds = dict(
            db.execute(sa.select(rounds.c.id, rounds.c.number).where(rounds.c.workshop == code)).all()
        )
        out = io.StringIO()
        writer = csv.writer(out, quoting=csv.QUOTE_ALL)
        writer.writerow(
            ["workshop", "round", "asked_again_of", "kind", "question", "student", "name", "answer", "right",
             "answered_utc", "before_reveal"]
        )  # fmt: skip
        for r in given:
            again = numbers_of_rounds.get(r.again_of, "") if r.again_of else ""
            before = r.revealed is None or r.answered <= r.revealed
            writer.writerow(
                [code, r.number, again, r.kind, rules.safe_cell(rules.plain_text(r.question)), numbers[r.student],
                 rules.safe_cell(names.get(r.student, "")), rules.safe_cell(r.given),
                 "yes" if rules.same_token(r.given, r.answer) else "no", _utc(r.answered), "yes" if before else "no"]
            )  # fmt: skip
        return out.getvalue()

    def end(self, code: str, secret: str) -> None:
        """Delete the workshop and everything the class answered in it now (the teacher's choice)."""
        with self.engine.begin() as db:
            row = self._locked(db, code)
            self._teacher(code, row.teacher_hash, secret)
            self._delete(db, [code])

    def end_as_operator(self, code: object) -> bool:
        """Delete a workshop without its teacher's secret (``python -m explorer.workshop end CODE``,
        for whoever runs the server). Returns whether there was one."""
        code = rules.room_code(code)
        with self.engine.begin() as db:
            if db.scalar(sa.select(workshops.c.code).where(workshops.c.code == code)) is None:
                return False
            self._delete(db, [code])
        return True

    def live(self) -> list[tuple[str, int, float, str, int]]:
        """Every live workshop, for the operator: (code, lesson, started, owner's address, students)."""
        with self._reading() as db:
            seated = (
                sa.select(sa.func.count()).where(students.c.workshop == workshops.c.code, students.c.removed.is_(None))
            ).scalar_subquery()  # fmt: skip
            found = db.execute(
                sa.select(workshops.c.code, workshops.c.lesson, workshops.c.created, workshops.c.owner, seated)
                .where(workshops.c.expires > self.clock()).order_by(workshops.c.created)
            ).all()  # fmt: skip
        return [tuple(row) for row in found]

    def lock(self, code: str, secret: str, locked: bool) -> None:
        """Close the workshop to new students (those in it stay), or open it again."""
        with self.engine.begin() as db:
            row = self._locked(db, code)
            self._teacher(code, row.teacher_hash, secret)
            db.execute(workshops.update().where(workshops.c.code == code).values(locked=bool(locked)))

    def allow_seats_per_address(self, code: str, secret: str, seats: object) -> int:
        """How many seats one address may hold in this workshop (a class behind one school router
        needs them all). Returns the number kept."""
        if not isinstance(seats, int | float) or isinstance(seats, bool) or not 1 <= seats <= self.limits.students:
            raise WorkshopError(f"Seats from one network: a number from 1 to {self.limits.students}.")
        with self.engine.begin() as db:
            row = self._locked(db, code)
            self._teacher(code, row.teacher_hash, secret)
            db.execute(workshops.update().where(workshops.c.code == code).values(seats_per_address=int(seats)))
        return int(seats)

    def settings(self, code: str, secret: str) -> tuple[bool, int]:
        """Whether the workshop is closed to new students, and the seats one address may hold."""
        with self._reading() as db:
            row = self._workshop(db, code)
            self._teacher(code, row.teacher_hash, secret)
        return bool(row.locked), row.seats_per_address or self.limits.seats_per_address

    def remove(self, code: str, secret: str, number: object) -> None:
        """Take student ``number`` (as numbered in the roll and the CSV) out of the workshop: their
        token stops working at once; what they answered stays in the CSV."""
        with self.engine.begin() as db:
            row = self._locked(db, code)
            self._teacher(code, row.teacher_hash, secret)
            seated = set(
                db.scalars(sa.select(students.c.id).where(students.c.workshop == code, students.c.removed.is_(None)))
            )
            ids = {n: student for student, n in self._student_numbers(db, code).items() if student in seated}
            if not isinstance(number, int) or isinstance(number, bool) or number not in ids:
                raise WorkshopError("There is no such student in this workshop: choose one from the list.")
            db.execute(students.update().where(students.c.id == ids[number]).values(removed=self.clock()))
            # Every student's page asks for its question again (``asked``): the removed one is refused.
            db.execute(workshops.update().where(workshops.c.code == code).values(asked=row.asked + 1))

    # ------------------------------------------------------------ the students
    def join(self, code: object, name: object, address: str) -> Seat:
        """A student joins (anonymous without a name); limited per address and minute, and per workshop."""
        now = self.clock()
        code = rules.room_code(code)
        name = rules.display_name(name, self.limits.name_chars)
        address = str(address)[:64]
        self.purge()  # an expired workshop is deleted at the next start or join, not only hidden
        with self.engine.begin() as db:
            db.execute(join_attempts.delete().where(join_attempts.c.at < now - 60))
            recent = db.scalar(
                sa.select(sa.func.count()).select_from(join_attempts).where(join_attempts.c.address == address)
            )
            if recent >= self.limits.joins_per_minute:
                raise WorkshopError(
                    f"Too many joins from your network in a minute (the most is {self.limits.joins_per_minute}): "
                    "wait a minute and join again."
                )
            db.execute(join_attempts.insert().values(address=address, at=now))
        with self.engine.begin() as db:  # the attempt is counted even when the join below is refused
            row = self._locked(db, code)
            if row.locked:
                raise WorkshopError(f"Workshop {code} is closed to new students: ask your teacher to open it.")
            if self._n_students(db, code) >= self.limits.students:
                raise WorkshopError(f"Workshop {code} is full ({self.limits.students} students): ask your teacher.")
            self._check_address(db, row, address)
            token = secrets.token_urlsafe(18)
            student = db.execute(
                students.insert().values(
                    workshop=code, token_hash=digest(token), name=name, joined=now, address=address
                )
            ).inserted_primary_key[0]
        return Seat(code, token, student, name)

    def _check_address(self, db, row, address: str) -> None:
        """One address holds a bounded number of seats (the teacher may raise it for a school router)."""
        most = row.seats_per_address or self.limits.seats_per_address
        held = db.scalar(
            sa.select(sa.func.count())
            .select_from(students)
            .where(students.c.workshop == row.code, students.c.address == address, students.c.removed.is_(None))
        )
        if held >= most:
            raise WorkshopError(
                f"Workshop {row.code} already has {held} students from your network, the most it allows: ask "
                "your teacher to allow more seats from one network."
            )

    def seat(self, code: object, token: object) -> Seat:
        """A student who joined before (their browser kept the token): their seat, else refused."""
        code = rules.room_code(code)
        if not isinstance(token, str) or len(token) > 100:
            raise WorkshopError("This browser's place in the workshop is damaged: join again.")
        with self._reading() as db:
            self._workshop(db, code)
            found = db.execute(
                sa.select(students.c.id, students.c.name, students.c.removed).where(
                    students.c.workshop == code, students.c.token_hash == digest(token)
                )
            ).one_or_none()
        if found is None:
            raise SeatGone(f"This browser is not in workshop {code}: join it again with the room code.")
        if found.removed is not None:
            raise SeatGone(f"Your teacher removed this seat from workshop {code}: ask them if you should join again.")
        return Seat(code, token, found.id, found.name)

    def answer(self, seat: Seat, round_id: int, answer: object) -> str:
        """Keep ``seat``'s answer to round ``round_id`` (the last one counts, until the reveal).
        Returns the answer as stored (a typed guess that is one of the options becomes that option)."""
        with self.engine.begin() as db:
            row = self._workshop(db, seat.code)
            question = db.execute(
                sa.select(rounds).where(rounds.c.id == round_id, rounds.c.workshop == seat.code)
            ).one_or_none()
            if question is None or row.round_id != question.id:
                raise WorkshopError("That question is closed: answer the one on screen now.")
            stored = self._checked_answer(question, answer)
            now = self.clock()
            new = {"round_id": question.id, "student": seat.student, "answer": stored, "answered": now}
            written = db.execute(_upsert(db, new, rounds.c.revealed.is_(None), question.id)).first()
            if written is None:  # (rowcount cannot tell: PostgreSQL's driver reports one either way)
                raise WorkshopError("The answer is revealed already: wait for the teacher's next question.")
            db.execute(answer_log.insert().values(new))  # every answer given, for the CSV
        return stored

    def _checked_answer(self, question, answer: object) -> str:
        options = json.loads(question.options)
        if question.kind == "next-token" and isinstance(answer, str) and answer not in options:
            guess = rules.typed_guess(answer, self.limits.typed_chars)
            return next((o for o in options if rules.same_token(o, guess)), guess)
        if answer not in options:
            raise WorkshopError("Choose one of the answers shown.")
        return answer

    def student_round(self, seat: Seat) -> StudentRound | None:
        """The current question as ``seat`` sees it: the right answer and why only once revealed."""
        with self._reading() as db:
            row = self._workshop(db, seat.code)
            if row.round_id is None:
                return None
            q = db.execute(sa.select(rounds).where(rounds.c.id == row.round_id)).one()
            mine = db.scalar(
                sa.select(answers.c.answer).where(answers.c.round_id == q.id, answers.c.student == seat.student)
            )
        revealed = q.revealed is not None
        return StudentRound(
            q.id, q.number, q.kind, q.title, q.question, json.loads(q.options), mine, revealed,
            q.answer if revealed else None, q.why if revealed else None,
        )  # fmt: skip

    # ------------------------------------------------------------ anyone with the code
    def pulse(self, code: object) -> Pulse | None:
        """What changed, for a page's poll: None when there is no such workshop (live)."""
        try:
            code = rules.room_code(code)
        except WorkshopError:
            return None
        with self._reading() as db:
            columns = (workshops.c.version, workshops.c.asked, workshops.c.round_id)
            row = db.execute(sa.select(*columns).where(self._live(code))).one_or_none()
            if row is None:
                return None
            answered, last = 0, 0.0
            if row.round_id is not None:
                answered, last = db.execute(
                    sa.select(sa.func.count(), sa.func.max(answers.c.answered)).where(
                        answers.c.round_id == row.round_id
                    )
                ).one()
            return Pulse(row.version, row.asked, row.round_id, answered, self._n_students(db, code), last or 0.0)

    def led_view(self, code: object) -> tuple[int, dict]:
        """The teacher's view as last led (version, view); a student follows it."""
        code = rules.room_code(code)
        with self._reading() as db:
            row = self._workshop(db, code)
        return row.version, json.loads(row.lead)

    def roll(self, code: str, secret: str) -> list[str]:
        """Who joined, in the order they did: their names ("" when anonymous). For the teacher."""
        return [name for _, name in self.seats(code, secret)]

    def seats(self, code: str, secret: str) -> list[tuple[int, str]]:
        """The students in the workshop (not removed): their numbers (as in the CSV) and names."""
        with self._reading() as db:
            row = self._workshop(db, code)
            self._teacher(code, row.teacher_hash, secret)
            numbers = self._student_numbers(db, code)
            found = db.execute(
                sa.select(students.c.id, students.c.name)
                .where(students.c.workshop == code, students.c.removed.is_(None)).order_by(students.c.id)
            ).all()  # fmt: skip
        return [(numbers[student], name) for student, name in found]

    # ------------------------------------------------------------ expiry
    def purge(self) -> int:
        """Delete every workshop past its expiry, with its students and answers. Returns how many."""
        now = self.clock()
        with self.engine.begin() as db:
            gone = list(db.scalars(sa.select(workshops.c.code).where(workshops.c.expires <= now)))
            if gone:
                self._delete(db, gone)
            db.execute(downloads.delete().where(downloads.c.expires <= now))
            db.execute(join_attempts.delete().where(join_attempts.c.at < now - 60))
        return len(gone)

    # ------------------------------------------------------------ helpers
    @contextlib.contextmanager
    def _reading(self):
        """A transaction that only reads: in SQLite a deferred one, which in WAL mode never waits
        for a writer (every page polls; a poll must not queue behind the class's answers)."""
        with self.engine.connect() as db:
            db.execution_options(reading=True)
            with db.begin():
                yield db

    def _live(self, code: str):
        return sa.and_(workshops.c.code == code, workshops.c.expires > self.clock())

    def _workshop(self, db, code: str):
        row = db.execute(sa.select(workshops).where(self._live(code))).one_or_none()
        if row is None:
            raise WorkshopError(GONE.format(code=code))
        return row

    def _locked(self, db, code: str):
        """The workshop's row, locked until the transaction ends (PostgreSQL: FOR UPDATE; SQLite
        transactions here are IMMEDIATE, one writer at a time, see database.connect)."""
        row = db.execute(sa.select(workshops).where(self._live(code)).with_for_update()).one_or_none()
        if row is None:
            raise WorkshopError(GONE.format(code=code))
        return row

    def _n_students(self, db, code: str) -> int:
        return db.scalar(
            sa.select(sa.func.count())
            .select_from(students)
            .where(students.c.workshop == code, students.c.removed.is_(None))
        )

    def _student_numbers(self, db, code: str) -> dict[int, int]:
        """Each student's number in the workshop (1, 2, ... in the order they joined): the CSV's
        name for them, which says nothing about them."""
        ids = db.scalars(sa.select(students.c.id).where(students.c.workshop == code).order_by(students.c.id))
        return {student: number for number, student in enumerate(ids, start=1)}

    def _counts(self, db, question) -> dict[str, int]:
        """How many chose each option (every option listed, 0 included), then each other typed guess;
        only the answers kept before the reveal."""
        query = sa.select(answers.c.answer).where(answers.c.round_id == question.id)
        if question.revealed is not None:
            query = query.where(answers.c.answered <= question.revealed)
        given = Counter(db.scalars(query))
        counts = {option: given.pop(option, 0) for option in json.loads(question.options)}
        return counts | dict(given.most_common())

    @staticmethod
    def _delete(db, codes: list[str]) -> None:
        """A workshop and everything in it, children first (not left to the database's cascade)."""
        round_ids = sa.select(rounds.c.id).where(rounds.c.workshop.in_(codes))
        db.execute(answers.delete().where(answers.c.round_id.in_(round_ids)))
        db.execute(answer_log.delete().where(answer_log.c.round_id.in_(round_ids)))
        db.execute(downloads.delete().where(downloads.c.workshop.in_(codes)))
        db.execute(workshops.update().where(workshops.c.code.in_(codes)).values(round_id=None))
        db.execute(rounds.delete().where(rounds.c.workshop.in_(codes)))
        db.execute(students.delete().where(students.c.workshop.in_(codes)))
        db.execute(workshops.delete().where(workshops.c.code.in_(codes)))


def purge_every(workshops: Workshops, seconds: float = 60.0) -> threading.Event:
    """Delete expired workshops every ``seconds`` on a thread of their own (not only at the next
    start or join, as before): an ended workshop's rows are gone within a minute of its expiry.
    Returns the event that stops it."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(seconds):
            try:
                workshops.purge()
            except Exception:  # a database away for a moment: the next round tries again
                log.warning("expired workshops not deleted this time", exc_info=True)

    threading.Thread(target=run, name="workshop-purge", daemon=True).start()
    return stop


def _share_right(counts: dict[str, int], answer: str) -> float | None:
    total = sum(counts.values())
    return sum(n for text, n in counts.items() if rules.same_token(text, answer)) / total if total else None


def _upsert(db, values: dict, still_open, round_id: int):
    """Insert an answer, or replace the student's earlier one, only while the round is unrevealed:
    one statement, so that a reveal between a check and the write cannot let a late answer in."""
    dialect = db.dialect.name
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        raise RuntimeError(f"workshops are kept in SQLite or PostgreSQL, not {dialect}")
    chosen = sa.select(*(sa.literal(v) for v in values.values())).where(
        sa.exists().where(rounds.c.id == round_id, still_open)
    )
    statement = insert(answers).from_select(list(values), chosen)
    return statement.on_conflict_do_update(
        index_elements=[answers.c.round_id, answers.c.student],
        set_={"answer": statement.excluded.answer, "answered": statement.excluded.answered},
    ).returning(answers.c.answer)


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")
