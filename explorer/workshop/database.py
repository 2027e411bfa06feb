"""Where a workshop is kept: its tables, and the database they live in.

SQLite by default: one file under the cache folder (``$DECODER_EXPLORER_CACHE``), in WAL mode so
that the class's answers (short writes) and the pages' polls (reads) do not wait for each other.
``$DECODER_EXPLORER_DATABASE_URL`` names another database, a PostgreSQL server
(``postgresql+psycopg://user@host:5432/name``) when several app processes share one workshop.
Written with SQLAlchemy Core: one schema, the same queries on both.

Nothing a workshop needs lives in a process's memory: a restart, or another replica, reads it back.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import sqlalchemy as sa

from explorer.loading import cache_root

DATABASE_URL_ENV = "DECODER_EXPLORER_DATABASE_URL"

metadata = sa.MetaData()

# A workshop: its room code, the teacher secret's hash (never the secret), the lesson it runs,
# and what the teacher's page shows (``lead``, a JSON view; ``version`` counts its changes, ``asked``
# the questions posed and revealed: a student's page redraws everything for the one, its panel for the other).
workshops = sa.Table(
    "workshops", metadata,
    sa.Column("code", sa.String(12), primary_key=True),
    sa.Column("teacher_hash", sa.String(64), nullable=False),
    sa.Column("lesson", sa.Integer, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("expires", sa.Float, nullable=False, index=True),
    sa.Column("lead", sa.Text, nullable=False, default="{}"),
    sa.Column("version", sa.Integer, nullable=False, default=0),
    sa.Column("asked", sa.Integer, nullable=False, default=0),
    sa.Column("round_id", sa.Integer, nullable=True),  # the question open or last revealed
    sa.Column("owner", sa.String(64), nullable=False, default="", index=True),  # the address that started it
    sa.Column("locked", sa.Boolean, nullable=False, default=False),  # closed to new students
    sa.Column("seats_per_address", sa.Integer, nullable=True),  # the teacher's, else Limits.seats_per_address
)  # fmt: skip

# A student who joined: known by a token their browser keeps (its hash here), and a name or none.
students = sa.Table(
    "students", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workshop", sa.String(12), sa.ForeignKey("workshops.code", ondelete="CASCADE"), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("name", sa.Text, nullable=False, default=""),
    sa.Column("joined", sa.Float, nullable=False),
    sa.Column("address", sa.String(64), nullable=False, default=""),  # for the seats one address may hold
    sa.Column("removed", sa.Float, nullable=True),  # when the teacher removed the seat (its token then fails)
)  # fmt: skip

# A question put to the class: a lesson step's (its options, answer and why as the live model
# posed them) or "what token comes next?" (the model's candidates and their probabilities).
# Asking it again is a new round that names the first (``again_of``): peer instruction's second vote.
rounds = sa.Table(
    "rounds", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workshop", sa.String(12), sa.ForeignKey("workshops.code", ondelete="CASCADE"), nullable=False),
    sa.Column("number", sa.Integer, nullable=False),  # 1, 2, ... within the workshop
    sa.Column("kind", sa.String(16), nullable=False),  # "lesson" | "next-token"
    sa.Column("title", sa.Text, nullable=False),  # what the teacher's chart and the CSV call it
    sa.Column("question", sa.Text, nullable=False),
    sa.Column("options", sa.Text, nullable=False),  # JSON list of strings
    sa.Column("answer", sa.Text, nullable=False),
    sa.Column("why", sa.Text, nullable=False),
    sa.Column("probabilities", sa.Text, nullable=False, default="{}"),  # JSON {option: p} (next-token)
    sa.Column("again_of", sa.Integer, nullable=True),
    sa.Column("opened", sa.Float, nullable=False),
    sa.Column("revealed", sa.Float, nullable=True),
)  # fmt: skip

# One answer per student and round: the last one sent counts, until the reveal.
answers = sa.Table(
    "answers", metadata,
    sa.Column("round_id", sa.Integer, sa.ForeignKey("rounds.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("student", sa.Integer, sa.ForeignKey("students.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("answer", sa.Text, nullable=False),
    sa.Column("answered", sa.Float, nullable=False),
)  # fmt: skip

# Every answer given, in the order given (``answers`` keeps only the last, which counts): the CSV's rows.
answer_log = sa.Table(
    "answer_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("round_id", sa.Integer, sa.ForeignKey("rounds.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("student", sa.Integer, sa.ForeignKey("students.id", ondelete="CASCADE"), nullable=False),
    sa.Column("answer", sa.Text, nullable=False),
    sa.Column("answered", sa.Float, nullable=False),
)  # fmt: skip

# A download of the answers: a random ticket (its hash here) that the teacher's page gets and uses
# at once; it opens the CSV once, within a minute, while the workshop lives (no file is written).
downloads = sa.Table(
    "downloads", metadata,
    sa.Column("ticket_hash", sa.String(64), primary_key=True),
    sa.Column("workshop", sa.String(12), sa.ForeignKey("workshops.code", ondelete="CASCADE"), nullable=False),
    sa.Column("expires", sa.Float, nullable=False),
)  # fmt: skip

# Columns added after the first release: added to a database made before them (``connect``).
ADDED_COLUMNS = {
    "workshops": ("owner", "locked", "seats_per_address"),
    "students": ("address", "removed"),
}

# Join attempts, for the limit per address and minute (kept a minute, shared by every replica).
join_attempts = sa.Table(
    "join_attempts", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("address", sa.String(64), nullable=False, index=True),
    sa.Column("at", sa.Float, nullable=False, index=True),
)  # fmt: skip


def default_url() -> str:
    """``$DECODER_EXPLORER_DATABASE_URL``, else the SQLite file under the cache folder."""
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        return url
    folder = Path(cache_root())
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):  # the app's own cache folder: this user's alone
        folder.chmod(0o700)
    path = folder / "workshops.sqlite3"
    if not path.exists():  # made private before SQLite opens it (its WAL takes its mode)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    return f"sqlite:///{path}"


def connect(url: str | None = None) -> sa.Engine:
    """An engine on ``url`` (default: ``default_url()``) with the tables made if they are not there."""
    url = url or default_url()
    if url.startswith("sqlite"):
        # Each connection waits up to 10 s for another's write, rather than failing at once. The pool
        # never makes anyone wait for a connection (-1: no limit on connections beyond the 10 kept):
        # the page's poll reads on the event loop, which must never block.
        engine = sa.create_engine(
            url, connect_args={"timeout": 10, "check_same_thread": False}, pool_size=10, max_overflow=-1
        )
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        sa.event.listen(engine, "begin", _begin_immediate)
    else:
        engine = sa.create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=40, pool_timeout=5)
    metadata.create_all(engine)
    _add_new_columns(engine)
    if engine.url.get_backend_name() == "sqlite" and engine.url.database:
        private_files(Path(engine.url.database))
    return engine


def _add_new_columns(engine: sa.Engine) -> None:
    """A database made by an earlier release gets the columns it lacks (nothing is dropped)."""
    inspector = sa.inspect(engine)
    for table_name, names in ADDED_COLUMNS.items():
        present = {column["name"] for column in inspector.get_columns(table_name)}
        for name in names:
            if name in present:
                continue
            column = metadata.tables[table_name].c[name]
            kind = column.type.compile(engine.dialect)
            default = "" if column.nullable else f" NOT NULL DEFAULT {_literal(column.default.arg)}"
            with engine.begin() as db:
                db.exec_driver_sql(f"ALTER TABLE {table_name} ADD COLUMN {name} {kind}{default}")


def _literal(value) -> str:
    if isinstance(value, bool):
        return "FALSE" if not value else "TRUE"
    return "''" if value == "" else str(value)


def private_files(path: Path) -> None:
    """The workshop database and its WAL readable by this user only (names, answers, secrets'
    hashes): 0600. SQLite makes its -wal and -shm files with the database file's mode."""
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            name.chmod(0o600)


def _sqlite_pragmas(connection, _record) -> None:
    """WAL (readers and the writer do not block each other), and foreign keys (off by default in
    SQLite). The driver's own transactions are turned off: ``_begin_immediate`` starts them."""
    connection.isolation_level = None
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: a commit survives a crash of the app
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _begin_immediate(connection) -> None:
    """A transaction that may write takes SQLite's write lock when it begins (waiting for it, up to
    the timeout): one that read first and wrote later could otherwise fail at once with "database
    is locked" when another wrote in between, instead of waiting its turn. One that only reads
    (execution option ``reading``) begins deferred: in WAL mode it never waits."""
    reading = connection.get_execution_options().get("reading")
    connection.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")


def describe(engine: sa.Engine) -> str:
    """The database for a log line or the docs: the dialect and where (no password)."""
    return engine.url.render_as_string(hide_password=True)
