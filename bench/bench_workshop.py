"""A workshop under a class's load (issue 30): thirty students speaking the page's protocol
(tests/browser/page_client.py, at a browser's cost) and a teacher, against the app on this machine.

Each student joins, then does what their page does: a long poll, POST /workshop/wait, answered when
the workshop changed, then POST /workshop/round for the question (and the follow Sync event when
the teacher's view moved and they follow); meanwhile they step their own text as the class in
bench_load.py does (thinking 1-3 s between 15 clicks). The teacher asks "what token comes next?"
several times; the thirty answer (POST /workshop/answer) at random moments within the same 5 s.

Measured:
- each round: answers stored (from the database), none lost or doubled;
- the teacher's count: from the last answer sent to the teacher's page showing "30 of 30"
  (its own poll and Sync, as the page does), p50/p95 over the rounds (target: p95 <= 1 s);
- the class's Step round trip with the workshop running, against the same class without it,
  back to back in this run (targets as bench_load.py: p95 <= 1000 ms, p50 <= 600 ms).

With ``--explorers 10`` (issue 41's class), the thirty join and follow the teacher, who steps
their own text every 1.5 s during the rounds; only ten students step their own texts (which takes
them off the teacher's view); the other twenty follow (each of the teacher's steps is a follow
Sync on their page: in one process a fork of the teacher's session, no pass). Measured besides:
the teacher's Step, the followers' Sync round trips, and the server's peak memory.

    python bench/bench_workshop.py [--rounds 6] [--explorers 10]
Prints tables; not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from bench.bench_load import cpu_seconds, peak_rss_mb  # noqa: E402
from explorer.workshop import database  # noqa: E402
from tests.browser.conftest import ARTIFACTS, running_app, running_replicas  # noqa: E402
from tests.browser.load import (  # noqa: E402
    DECODER,
    SETTINGS,
    ClassPlan,
    LoadReport,
    UserRun,
    outputs_by_label,
    strip_items,
    user_input,
)
from tests.browser.page_client import PageClient  # noqa: E402

# Every student on SmolLM2: a student who joins takes the teacher's model, and both runs must step the same.
CLASS = ClassPlan(translator_every=10**6, think_s=(1.0, 3.0))
STUDENTS, WINDOW_S = 30, 5.0
SPREAD_S = 0.6  # explorer/ui/static/workshop.js: SPREAD_MS
TEACHER_EVERY_S = 0.4  # explorer/ui/static/workshop.js: TEACHER_EVERY_MS
NO_SYNC = POLL_ONLY = False
ANSWERED = re.compile(r"(\d+) of (\d+) students answered")


class Page(PageClient):
    """One student's or the teacher's page: its events one at a time over its one connection (the
    client reads one event stream per call; two at once on one session would read each other's)."""

    def __init__(self, url: str):
        super().__init__(url)
        self.lock = threading.Lock()

    def predict(self, *data, api_name: str):
        with self.lock:
            return super().predict(*data, api_name=api_name)


class PolledPage:
    """A page's workshop poll (explorer/ui/static/workshop.js): POST /workshop/wait with its seat (a
    student's token, the teacher's secret) in the body; on a change, a
    teacher's page sends its Sync event; a student's asks for its question (POST /workshop/round)
    and, when the teacher's view moved and it follows, sends its follow Sync event."""

    def __init__(self, url: str, client: PageClient, code: str, teacher: bool, live: dict | None = None):
        # The page's own cookies (behind nginx, the one that routes it to its replica).
        self.http = httpx.Client(base_url=url, timeout=30, cookies=client.http.cookies)
        self.client, self.code, self.teacher = client, code, teacher
        self.live = live or {}  # a student's seat as their page reads it: token, following
        self.stop, self.syncs, self.requests = threading.Event(), 0, 0
        self.follow_ms: list[float] = []  # each follow Sync's round trip (a following student's page)
        self.on_sync = None  # called with each Sync's outputs (the teacher's: the count it shows)
        self.shown_round = None  # the question this page has shown (a student answers only then)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        seen, version = "", None
        seat = {"secret": self.live.get("secret")} if self.teacher else {"token": self.live.get("token")}
        last_sync = 0.0
        while not self.stop.is_set():
            body = {"code": self.code, "seen": seen, **seat}
            try:
                pulse = self.http.post("/workshop/wait", json=body, timeout=60).json()
            except httpx.HTTPError:  # the app stopped under a waiting request (the end of the run)
                return
            if pulse["key"] != seen:
                seen = pulse["key"]
                moved, version = pulse.get("version") != version, pulse.get("version")
                if self.teacher:  # as the page: at most one Sync every TEACHER_EVERY_S
                    time.sleep(max(0.0, last_sync + TEACHER_EVERY_S - time.perf_counter()))
                    last_sync = time.perf_counter()
                    outputs = self.client.predict(api_name="/on_sync")
                    self.syncs += 1
                    if self.on_sync:
                        self.on_sync(outputs)
                    continue
                if POLL_ONLY:
                    self.shown_round = pulse.get("round")
                    continue
                time.sleep(random.uniform(0, SPREAD_S))  # as the page: thirty requests spread, not one burst
                if not self.ask_round():
                    continue
                if moved and self.live.get("following"):
                    begin = time.perf_counter()
                    self.live = live_seat(self.client.predict(api_name="/on_follow_sync")) or self.live
                    self.follow_ms.append((time.perf_counter() - begin) * 1000)
                    self.syncs += 1

    def ask_round(self) -> bool:
        try:
            view = self.post("/workshop/round", {})
        except httpx.HTTPError:
            return False
        self.shown_round = view.get("round")
        return True

    def post(self, path: str, body: dict) -> dict:
        self.requests += 1
        answer = self.http.post(path, json={"code": self.code, "token": self.live.get("token"), **body})
        answer.raise_for_status()
        return answer.json()


def live_seat(outputs) -> dict | None:
    """The seat a page's script reads (the hidden workshop_live box), from an event's outputs."""
    for value in outputs:
        text = value.get("value") if isinstance(value, dict) else value
        if isinstance(text, str) and text.startswith("{") and '"role"' in text:
            return json.loads(text)
    return None


def shown_count(outputs) -> int | None:
    for value in outputs:
        text = value.get("value") if isinstance(value, dict) else value
        if isinstance(text, str) and (found := ANSWERED.search(text)):
            return int(found.group(1))
    return None


def start_teacher(url: str) -> tuple[PageClient, str, dict]:
    """The teacher's page, the room code, and its seat as the page's script reads it (with the secret)."""
    teacher = Page(url)
    teacher.predict(DECODER, "The capital of France is", *SETTINGS, None, api_name="/on_load")
    teacher.predict(3, {}, api_name="/on_lesson")
    outputs = teacher.predict([], api_name="/on_start")  # the workshops this browser started (none)
    link = next(v for v in outputs if isinstance(v, str) and v.startswith("?workshop="))
    return teacher, link.split("=", 1)[1], live_seat(outputs)


def open_round_options(db_url: str) -> tuple[int, list[str]]:
    engine = sa.create_engine(db_url)
    with engine.connect() as db:
        row = db.execute(sa.select(database.rounds).order_by(database.rounds.c.id.desc())).first()
    engine.dispose()
    return row.id, json.loads(row.options)


def stored_answers(db_url: str, round_id: int) -> tuple[int, int]:
    """(answers stored for the round, distinct students among them)."""
    engine = sa.create_engine(db_url)
    with engine.connect() as db:
        found = db.execute(sa.select(database.answers.c.student).where(database.answers.c.round_id == round_id)).all()
    engine.dispose()
    return len(found), len({r.student for r in found})


def workshop_class(
    url: str, db_url: str, rounds: int, explorers: int = STUDENTS
) -> tuple[LoadReport, list[dict], dict]:
    """The class of bench_load.py (the same users, texts and thinking) in a workshop: each joins,
    its page polls, and the first ``explorers`` step their own texts (which takes them off the
    teacher's view, as students exploring alone) while the teacher asks and reveals. With fewer
    than all exploring, the teacher steps their own text meanwhile and the rest follow it.
    Returns the explorers' steps, the rounds, and the teacher's steps and followers' Syncs (ms)."""
    teacher, code, teacher_seat = start_teacher(url)
    students, seats = [], []
    for u in range(STUDENTS):
        client = Page(url)
        client.predict(*user_input(u, CLASS), *SETTINGS, None, api_name="/on_load")
        seats.append(live_seat(client.predict(code, f"student {u}", api_name="/on_join")))
        students.append(client)
    pages = [PolledPage(url, c, code, teacher=False, live=seat) for c, seat in zip(students, seats, strict=True)]
    teacher_page = PolledPage(url, teacher, code, teacher=True, live=teacher_seat)
    counts: list[tuple[float, int]] = []
    teacher_page.on_sync = lambda outputs: counts.append((time.perf_counter(), shown_count(outputs)))
    for page in (*pages, teacher_page):
        page.shown_round = "any" if NO_SYNC and page in pages else None
        if not NO_SYNC or page is teacher_page:
            page.thread.start()
    stepping = [UserRun(u) for u in range(explorers)]
    ready = threading.Barrier(explorers + 1, timeout=600)
    steppers = [threading.Thread(target=step_own, args=(students[u], u, stepping[u], ready)) for u in range(explorers)]
    for thread in steppers:
        thread.start()
    ready.wait()  # every explorer has their own text loaded
    teacher_run, leading = UserRun(-1), threading.Event()
    if explorers < STUDENTS:
        threading.Thread(target=teacher_steps, args=(teacher, teacher_run, leading), daemon=True).start()
    begin = time.perf_counter()
    results = [ask_round(teacher, pages, counts, db_url, r) for r in range(rounds)]
    leading.set()
    for thread in steppers:
        thread.join()
    for page in (*pages, teacher_page):
        page.stop.set()
    following = {"teacher": teacher_run.latencies_ms, "follow": [ms for page in pages for ms in page.follow_ms]}
    return LoadReport(explorers, 15, stepping, time.perf_counter() - begin), results, following


def teacher_steps(teacher: Page, run: UserRun, done: threading.Event, every_s: float = 1.5) -> None:
    """The teacher steps their own text every ``every_s`` until ``done`` (again from the start at
    the end token): each step moves the view the following students take."""
    text = "The capital of France is"
    teacher.predict(text, *SETTINGS, api_name="/on_reset")
    while not done.wait(every_s):
        begin = time.perf_counter()
        result = teacher.predict(text, *SETTINGS, api_name="/on_step")
        run.latencies_ms.append((time.perf_counter() - begin) * 1000)
        shown = strip_items(outputs_by_label(teacher, "/on_step", result)["strip"])
        if (shown and shown[-1].get("token") in ("</s>", "<|im_end|>", "<|endoftext|>")) or len(shown) > 60:
            teacher.predict(text, *SETTINGS, api_name="/on_reset")


def step_own(client: Page, user: int, run: UserRun, ready: threading.Barrier, steps: int = 15) -> None:
    """A student stepping their own text: the round trip of each Step, and a check that the strip
    is their own text grown by one token (no other user's, no lost step)."""
    text = user_input(user, CLASS)[1]
    thinking = random.Random(user)
    count = None
    try:
        # Their own text first (as the class in bench_load.py has it loaded before its timed steps).
        client.predict(text, *SETTINGS, api_name="/on_reset")
        ready.wait()
        for _ in range(steps):
            time.sleep(thinking.uniform(*CLASS.think_s))
            begin = time.perf_counter()
            result = client.predict(text, *SETTINGS, api_name="/on_step")
            run.latencies_ms.append((time.perf_counter() - begin) * 1000)
            shown = strip_items(outputs_by_label(client, "/on_step", result)["strip"])
            first = "".join(item.get("token", "") for item in shown[:3])
            if not text.replace(" ", "").startswith(first.replace(" ", "").replace("·", "")[:8]):
                run.crosstalk.append(f"user {user} saw {first!r}")
            if count is not None and len(shown) != count + 1:
                run.crosstalk.append(f"user {user}: {count} tokens became {len(shown)}")
            count = len(shown)
            if shown and shown[-1].get("token") in ("</s>", "<|im_end|>", "<|endoftext|>"):
                client.predict(text, *SETTINGS, api_name="/on_reset")
                count = None
    except Exception as error:  # counted, not raised
        run.errors.append(f"user {user}: {type(error).__name__}: {error}")


def ask_round(teacher: Page, pages: list[PolledPage], counts: list, db_url: str, number: int) -> dict:
    """One question: asked, answered by every student at a random moment of the same 5 s (once their
    page shows it, as a person can only answer then), counted on the teacher's page, revealed."""
    teacher.predict(api_name="/on_ask_next")
    round_id, options = open_round_options(db_url)
    rng = random.Random(number)
    sent: list[float] = []
    errors: list[str] = []

    asked = time.perf_counter()

    def answer(page: PolledPage, delay: float, choice: str) -> None:
        while page.shown_round not in (round_id, "any") and time.perf_counter() < asked + 30:
            time.sleep(0.02)
        time.sleep(max(0.0, asked + delay - time.perf_counter()))
        try:
            page.post("/workshop/answer", {"round": round_id, "choice": choice, "typed": ""})
            sent.append(time.perf_counter())
        except Exception as error:  # reported in the table
            errors.append(str(error))

    threads = [
        threading.Thread(target=answer, args=(page, rng.uniform(0, WINDOW_S), rng.choice(options))) for page in pages
    ]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    last = max(sent) if sent else time.perf_counter()
    deadline = time.perf_counter() + 30
    while time.perf_counter() < deadline and not any(n == STUDENTS and t >= last for t, n in counts):
        time.sleep(0.02)
    seen = next((t for t, n in counts if n == STUDENTS and t >= last), None)
    stored, distinct = stored_answers(db_url, round_id)
    teacher.predict(api_name="/on_reveal")
    shown = "never" if seen is None else f"{seen - last:.2f} s"
    print(f"  round {number + 1}: {stored} stored, the count shown {shown} after the last; {errors[:1]}", flush=True)
    time.sleep(2)  # the class reads the answer
    return {"stored": stored, "distinct": distinct, "errors": errors, "count_s": None if seen is None else seen - last}


def plain_class(url: str) -> LoadReport:
    from tests.browser.load import simulate_users

    return simulate_users(url, STUDENTS, 15, CLASS)


@contextlib.contextmanager
def serving(replicas: int, log: Path, db_url: str):
    """(URL, the server processes' pids): one app process, or nginx and ``replicas`` replicas."""
    # Thirty students from one address (this machine): a school router's class, as its teacher allows.
    env = {"DECODER_EXPLORER_DATABASE_URL": db_url, "DECODER_EXPLORER_PROFILE": "1",
           "DECODER_EXPLORER_SEATS_PER_ADDRESS": str(STUDENTS)}  # fmt: skip
    if not replicas:
        with running_app(log, **env) as (url, server):
            yield url, [server.pid]
        return
    run_dir = ARTIFACTS / "bench-workshop-replicas"
    shutil.rmtree(run_dir, ignore_errors=True)
    with running_replicas(run_dir, replicas, **env) as (url, _, _):
        state = json.loads((run_dir / "replicas.json").read_text())
        yield url, [r["pid"] for r in state["replicas"]] + [state["nginx_pid"]]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def servers_cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--no-sync", action="store_true", help="students' pages do not poll (what polling costs)")
    parser.add_argument("--poll-only", action="store_true", help="students' pages poll but ask nothing more")
    parser.add_argument("--replicas", type=int, default=0, help="through nginx and this many replicas (explorer.serve)")
    parser.add_argument(
        "--explorers", type=int, default=STUDENTS, help="students stepping their own texts (the rest follow)"
    )
    args = parser.parse_args()
    global NO_SYNC, POLL_ONLY
    NO_SYNC, POLL_ONLY = args.no_sync, args.poll_only
    folder = Path(tempfile.mkdtemp(prefix="bench-workshop-"))
    db_url = f"sqlite:///{folder / 'workshops.sqlite3'}"
    log = ARTIFACTS / "bench-workshop-app.log"
    log.unlink(missing_ok=True)
    with serving(args.replicas, log, db_url) as (url, pids):
        cpu = [(servers_cpu(pids), cpu_seconds(os.getpid()), time.perf_counter())]
        alone = plain_class(url)
        cpu.append((servers_cpu(pids), cpu_seconds(os.getpid()), time.perf_counter()))
        print(f"the class alone: p50 {alone.median:.0f} ms, p95 {alone.percentile(0.95):.0f} ms", flush=True)
        with_workshop, rounds, following = workshop_class(url, db_url, args.rounds, args.explorers)
        cpu.append((servers_cpu(pids), cpu_seconds(os.getpid()), time.perf_counter()))
        peak_mb = max(peak_rss_mb(pid) for pid in pids)
    for name, (s0, u0, t0), (s1, u1, t1) in zip(("alone", "workshop"), cpu, cpu[1:], strict=False):
        print(
            f"{name}: server CPU {100 * (s1 - s0) / (t1 - t0):.0f}%, simulated users {100 * (u1 - u0) / (t1 - t0):.0f}%"
        )
    for line in (with_workshop.errors + with_workshop.crosstalk)[:5]:
        print("  ", line)
    print("\nThe class's Step round trip (ms), students thinking 1-3 s, 15 steps each")
    print(f"{'run':44} {'p50':>6} {'p95':>6} {'errors':>7} {'x-talk':>7}")
    for name, report in (
        (f"{STUDENTS} without a workshop", alone),
        (f"{args.explorers} exploring while a workshop runs", with_workshop),
    ):
        print(f"{name:44} {report.median:6.0f} {report.percentile(0.95):6.0f} {len(report.errors):7} "
              f"{len(report.crosstalk):7}")  # fmt: skip
    syncs = f"{STUDENTS - args.explorers} followers' Sync of the teacher's view"
    for name, values in (("the teacher's Step, every 1.5 s", following["teacher"]), (syncs, following["follow"])):
        if values:
            p50, p95 = statistics.median(values), percentile(values, 0.95)
            print(f"{name:44} {p50:6.0f} {p95:6.0f}  ({len(values)} of them)")
    print(f"the server's peak memory (VmHWM, the largest process): {peak_mb:,.0f} MB")
    print(f"\nWorkshop rounds: {STUDENTS} students answer within the same {WINDOW_S:.0f} s")
    print(f"{'round':>5} {'stored':>7} {'students':>9} {'errors':>7} {'count shown after (s)':>22}")
    for i, r in enumerate(rounds, start=1):
        shown = "never" if r["count_s"] is None else f"{r['count_s']:.2f}"
        print(f"{i:>5} {r['stored']:>7} {r['distinct']:>9} {len(r['errors']):>7} {shown:>22}")
    delays = sorted(r["count_s"] for r in rounds if r["count_s"] is not None)
    if delays:
        p95 = delays[min(len(delays) - 1, int(0.95 * len(delays)))]
        print(f"teacher's count reaches {STUDENTS}: p50 {statistics.median(delays):.2f} s, p95 {p95:.2f} s "
              f"after the last answer")  # fmt: skip
    print("targets: every answer stored once; the count within 1 s (p95); class p95 <= 1000 ms, p50 <= 600 ms")


if __name__ == "__main__":
    main()
