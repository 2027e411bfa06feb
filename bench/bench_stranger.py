"""A stranger on the public Space: what one anonymous client takes from everyone (issue 58).

Starts the app (``python app.py``, the network cut off as in the tests) on 127.0.0.1, one fresh
server per part, and replays what issue 58 found with a client that speaks Gradio's queue
protocol (tests/browser/page_client.py): no browser, no heartbeat, as a script or a bot would.

  memory     4 unload-and-reload cycles: a page on the translator unloads SmolLM2, which another
             visitor's session holds, and the next visitor loads it again: resident memory growth
  sessions   20 raw clients, each a session of ~1,000 tokens: growth past the first session, then
             whether each steps again with its own tokens (its cache may have been let go)
  cpu        an honest Step's p50/p95 alone, and while two clients send 1,000-word prefills
  attention  /attention on a 1,000-token text: the answer's bytes and the seconds it took
  logs       log growth from a 5 MB refused dropdown value; tracebacks over >= 150 malformed calls

Prints each part's rows as it ends, then one markdown table (target beside each measure).
Not a test: no assertion on a time (machines are shared; note their load, printed here).

    python bench/bench_stranger.py
    python bench/bench_stranger.py --only memory,logs
    python bench/bench_stranger.py --app-args "--session-memory-mb 500"   # options of the app under test
    python bench/bench_stranger.py --only memory --gemma    # the cycles on Gemma 3 270M too (slow)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import ARTIFACTS, cut_off_env, free_port, stop_app, tracebacks, wait_serving  # noqa: E402
from tests.browser.load import SETTINGS, outputs_by_label, strip_items, strip_text  # noqa: E402
from tests.browser.page_client import PageClient  # noqa: E402

SMOLLM2 = "smollm2-135m-instruct"
TRANSLATOR = "en-de-numbers"
GEMMA = "gemma-3-270m"
PARTS = ("memory", "sessions", "cpu", "attention", "logs")
# One SmolLM2 token each: 1,000 of them are 1,000 tokens.
WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "the", "dog", "ran", "to", "it"]
API_STEP_DEFAULTS = (None, 0.0, 0, 1.0, 0)  # /step's tokens, temperature, top_k, top_p, seed


def long_text(words: int = 1000, shift: int = 0) -> str:
    return " ".join(WORDS[(i + shift) % len(WORDS)] for i in range(words))


@dataclass
class Row:
    part: str
    measure: str
    target: str
    measured: str
    met: bool | None = None  # None: a number to read, no target of its own

    def markdown(self) -> str:
        verdict = "" if self.met is None else ("met" if self.met else "not met")
        return f"| {self.measure} | {self.target} | {self.measured} | {verdict} |"


# ---------------------------------------------------------------- the server under test
@contextlib.contextmanager
def stranger_server(part: str, app_args: list[str]):
    """``python app.py *app_args`` on a free port of 127.0.0.1 with no network; yield (its URL, its
    process, its log: a fresh file per part)."""
    log = ARTIFACTS / f"bench-stranger-{part}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    for _ in range(3):  # a port chosen free may be taken before the app binds it: the app says so, and exits
        port = free_port()
        env = cut_off_env(GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port))
        with open(log, "a") as out:
            process = subprocess.Popen(
                [sys.executable, "app.py", *app_args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        url = f"http://127.0.0.1:{port}"
        try:
            if wait_serving(process, url, log, 0):
                break
        except BaseException:
            stop_app(process)
            raise
    else:
        raise RuntimeError(f"no free port; see {log}")
    try:
        yield url, process, log
    finally:
        stop_app(process)


def rss_mb(pid: int) -> float:
    """The process's resident memory now (VmRSS), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def settled_rss_mb(pid: int, wait_s: float = 3.0) -> float:
    """VmRSS after ``wait_s`` seconds: long enough for the server's memory returner (once a second)."""
    time.sleep(wait_s)
    return rss_mb(pid)


def open_page(url: str, model: str, text: str) -> tuple[PageClient, list[dict]]:
    """A new visitor: the page's first load on ``model`` with ``text`` (a raw client: no heartbeat)."""
    client = PageClient(url)
    loaded = client.predict(model, text, *SETTINGS, None, api_name="/on_load")  # None: no kept session
    return client, strip_items(outputs_by_label(client, "/on_load", loaded)["strip"])


def step(client: PageClient, text: str) -> list[dict]:
    """The page's Step; the token strip it shows after."""
    result = client.predict(text, *SETTINGS, api_name="/on_step")
    return strip_items(outputs_by_label(client, "/on_step", result)["strip"])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# ---------------------------------------------------------------- the parts
def memory_part(url: str, pid: int, victim: str = SMOLLM2, cycles: int = 4) -> list[Row]:
    """A visitor works on ``victim``; a stranger's page (on the translator) presses "Unload the
    second model" on ``victim``, and the next visitor loads it again, ``cycles`` times."""
    kept = [open_page(url, victim, "The capital of France is")[0]]  # everyone else, on the victim model
    stranger, _ = open_page(url, TRANSLATOR, "twenty-one")
    before = settled_rss_mb(pid)
    refused, reloads = 0, []
    for _ in range(cycles):
        try:
            stranger.predict(victim, api_name="/on_unload")
        except RuntimeError:  # the unload refused: what the change should do
            refused += 1
        began = time.perf_counter()
        kept.append(open_page(url, victim, "The capital of France is")[0])  # the next visitor, kept open
        reloads.append(time.perf_counter() - began)
    after = settled_rss_mb(pid)
    growth = after - before
    return [
        Row("memory", f"{cycles} unload-and-reload cycles of {victim}: RSS growth", "<= 100 MB in all",
            f"{growth:+.0f} MB ({before:.0f} -> {after:.0f} MB); {refused} of {cycles} unloads refused", growth <= 100),
        Row("memory", f"the next visitor's first load after each unload ({victim})", "",
            ", ".join(f"{s:.1f}" for s in reloads) + " s"),
    ]  # fmt: skip


def sessions_part(url: str, pid: int, clients: int = 20) -> list[Row]:
    """``clients`` raw clients, each a session of ~1,000 tokens (the page's load, then a Step), kept
    open with no heartbeat; then each steps again and must see its own tokens, one more."""
    texts = [f"Client {c} says: " + long_text(1000, shift=c) for c in range(clients)]
    pages, strips = [], []
    before = settled_rss_mb(pid)
    for c, text in enumerate(texts):
        client, _ = open_page(url, SMOLLM2, text)
        strips.append(step(client, text))
        pages.append(client)
        if c == 0:
            first = settled_rss_mb(pid)
    after = settled_rss_mb(pid)
    own, seconds = 0, []
    for client, text, strip in zip(pages, texts, strips, strict=True):
        began = time.perf_counter()
        try:
            again = step(client, text)
        except RuntimeError:
            continue
        seconds.append(time.perf_counter() - began)
        own += strip_text(again).startswith(strip_text(strip)) and len(again) == len(strip) + 1
    growth = after - first
    return [
        Row("sessions", f"{clients} raw clients of {len(strips[0])} tokens: RSS growth past the first session",
            "<= 700 MB (with --session-memory-mb 500)",
            f"{growth:+.0f} MB (first session {first - before:+.0f} MB; {after:.0f} MB in all)", growth <= 700),
        Row("sessions", "each session steps again with its own tokens", f"{clients} of {clients}",
            f"{own} of {clients}; a Step back p50 {statistics.median(seconds or [0]):.2f} s, max "
            f"{max(seconds or [0]):.2f} s", own == clients),
    ]  # fmt: skip


HONEST = "Count from one to fifty in words: one, two, three,"
END_TOKENS = ("</s>", "<|im_end|>", "<|endoftext|>")


def honest_steps(url: str, count: int = 30) -> list[float]:
    """An honest visitor's Steps on a short prompt, one after another: each round trip in ms."""
    client, _ = open_page(url, SMOLLM2, HONEST)
    step(client, HONEST)  # its first step: the prefill, not counted
    times = []
    for _ in range(count):
        began = time.perf_counter()
        strip = step(client, HONEST)
        times.append((time.perf_counter() - began) * 1000)
        if strip and strip[-1].get("token") in END_TOKENS:  # the text ended: start it again
            client.predict(HONEST, *SETTINGS, api_name="/on_reset")
            step(client, HONEST)
    client.close()
    return times


def cpu_part(url: str, pid: int, strangers: int = 2) -> list[Row]:
    """An honest Step alone, then while ``strangers`` clients send 1,000-word prefills to /step
    without pause (each call a new session: the API keeps nothing)."""
    quiet = honest_steps(url)
    stop, sent = threading.Event(), [0] * strangers

    def prefill(s: int) -> None:
        client = PageClient(url)
        while not stop.is_set():
            with contextlib.suppress(RuntimeError):
                client.predict(SMOLLM2, long_text(1000, shift=s + sent[s]), *API_STEP_DEFAULTS, api_name="/step")
            sent[s] += 1
        client.close()

    threads = [threading.Thread(target=prefill, args=(s,)) for s in range(strangers)]
    for thread in threads:
        thread.start()
    time.sleep(2)  # the strangers' prefills under way
    loaded = honest_steps(url)
    stop.set()
    for thread in threads:
        thread.join()
    ratio = percentile(loaded, 0.95) / percentile(quiet, 0.95)
    return [
        Row("cpu", "an honest Step alone: p50 / p95", "",
            f"{statistics.median(quiet):.0f} / {percentile(quiet, 0.95):.0f} ms"),
        Row("cpu", f"... while {strangers} clients send 1,000-word prefills: p50 / p95",
            "p95 <= 2x alone", f"{statistics.median(loaded):.0f} / {percentile(loaded, 0.95):.0f} ms: "
            f"{ratio:.1f}x ({sum(sent)} prefills sent)", ratio <= 2),
    ]  # fmt: skip


def attention_part(url: str, pid: int) -> list[Row]:
    """/attention (layer 0, every head's mean) on a 1,000-token text: all its rows at once (past the
    documented limit: a refusal is expected), then the first 64 rows (within it: an answer)."""
    client = PageClient(url)
    client.predict(SMOLLM2, "warm", api_name="/load_model")
    rows = []
    for label, query_to in (("all rows", None), ("rows 0-63", 64)):
        began = time.perf_counter()
        try:
            client.predict(SMOLLM2, long_text(1000), None, 0, "mean", "self", 0, query_to, api_name="/attention")
            said = "answered"
        except RuntimeError as error:
            said = f"refused: {str(error)[:120]}"
        seconds = time.perf_counter() - began
        size = client.answer_bytes
        # The whole text is the stranger's request (a refusal, at once); 64 rows are what it is told
        # to ask for instead: an answer within the bytes, after a prefill of 1,000 tokens (~2 s here).
        whole = query_to is None
        target = "a refusal, or <= 1,000,000 bytes, within 2 s" if whole else "<= 1,000,000 bytes"
        met = (seconds <= 2 or not whole) and (said != "answered" or size <= 1_000_000)
        measured = f"{said}; {size:,} bytes in {seconds:.1f} s"
        rows.append(Row("attention", f"/attention on a 1,000-token text, {label}", target, measured, met))
    return rows


def malformed_calls(client: PageClient) -> list[tuple[str, list]]:
    """(event, its inputs as sent) for calls a browser never makes: nulls and objects where a model
    name or a text belongs, every input null, too few inputs."""
    odd = [None, {}, {"name": "x"}, [], ["a"], 7, True]
    calls = []
    for value in odd:
        calls += [
            ("step", [value, "Hello", *API_STEP_DEFAULTS]),
            ("step", [SMOLLM2, value, *API_STEP_DEFAULTS]),
            ("load_model", [value]),
            ("attention", [value, "Hello", None, 0, "mean", "self", 0, None]),
            ("generate", [value, "Hello", 2, 0.0, 0, 1.0, 0]),
            ("translate", ["one", value, 4]),
            ("on_model_change", [value, None, "Hello", *SETTINGS]),
            ("on_custom_model", [value, None, "Hello", *SETTINGS]),
            ("on_load", [value, "Hello", *SETTINGS, None]),
            ("on_step", [None, value, *SETTINGS]),
            ("on_unload", [None, value]),
            ("attention", [SMOLLM2, value, None, 0, "mean", "self", 0, None]),
            ("generate", [SMOLLM2, "Hello", value, 0.0, 0, 1.0, 0]),
            ("translate", [value, TRANSLATOR, 4]),
        ]
    for name in ("step", "load_model", "attention", "generate", "translate", "on_step", "on_load",
                 "on_model_change", "on_custom_model", "on_unload", "on_read_both"):  # fmt: skip
        inputs = len(client.event("/" + name)[1]["inputs"])
        calls += [(name, []), (name, [None]), (name, [None] * inputs), (name, [{}] * inputs)]
        calls += [(name, [None] * max(0, inputs - 1))]
    return calls


def join_raw(client: PageClient, name: str, data: list) -> str:
    """Join the queue with ``data`` as it is (no padding, no check); how the call ended."""
    index, _ = client.event("/" + name)
    joined = client.http.post(
        f"{client.prefix}/queue/join",
        json={"data": data, "fn_index": index, "session_hash": client.session_hash, "trigger_id": None},
    )
    if joined.status_code != 200:
        return f"join {joined.status_code}"
    try:
        done = client.wait_for(joined.json()["event_id"])
    except RuntimeError as error:
        return f"error: {error}"
    return "answered" if done.get("success") else "refused"


def logs_part(url: str, pid: int, log: Path) -> list[Row]:
    """A 5 MB value where the model dropdown's belongs; then >= 150 malformed calls."""
    client = PageClient(url)
    client.predict(SMOLLM2, "Hello", *SETTINGS, None, api_name="/on_load")
    time.sleep(1)
    start = log.stat().st_size
    with contextlib.suppress(RuntimeError):
        client.predict("Z" * 5_000_000, "Hello", *SETTINGS, api_name="/on_model_change")
    echoed = client.answer_bytes
    time.sleep(1)  # the log written
    grown = log.stat().st_size - start
    start = log.stat().st_size
    calls = malformed_calls(client)
    ended: dict[str, int] = {}
    for name, data in calls:
        outcome = join_raw(client, name, data).split(":")[0]
        ended[outcome] = ended.get(outcome, 0) + 1
    time.sleep(1)
    with open(log, "rb") as f:
        f.seek(start)
        written = f.read().decode("utf-8", "replace")
    found = tracebacks(written)
    return [
        Row("logs", "log growth from a 5 MB refused dropdown value", "<= 2 KB",
            f"{grown:,} bytes (the answer: {echoed:,} bytes)", grown <= 2048),
        Row("logs", f"tracebacks over {len(calls)} malformed calls", "0",
            f"{len(found)} ({', '.join(f'{n} {k}' for k, n in sorted(ended.items()))}; "
            f"{len(written.splitlines())} log lines)", not found),
    ]  # fmt: skip


# ---------------------------------------------------------------- the run
def machine() -> str:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
    model = next((line.split(":", 1)[1].strip() for line in lscpu if line.startswith("Model name")), "?")
    return f"{model}, {os.cpu_count()} cores"


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_part(part: str, app_args: list[str], gemma: bool) -> list[Row]:
    with stranger_server(part, app_args) as (url, server, log):
        if part == "memory":
            rows = memory_part(url, server.pid)
            if gemma:
                rows += memory_part(url, server.pid, victim=GEMMA)
            return rows
        if part == "logs":
            return logs_part(url, server.pid, log)
        return {"sessions": sessions_part, "cpu": cpu_part, "attention": attention_part}[part](url, server.pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts (default: {','.join(PARTS)})")
    parser.add_argument("--app-args", default="", help='options for app.py, e.g. "--session-memory-mb 500"')
    parser.add_argument("--gemma", action="store_true", help="the unload cycles on Gemma 3 270M too (slow)")
    args = parser.parse_args()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--only: {', '.join(unknown)} not one of {', '.join(PARTS)}")
    app_args = shlex.split(args.app_args)
    print(f"{machine()}; load average {load_average()} before; app.py {args.app_args or '(no options)'}", flush=True)
    rows: list[Row] = []
    for part in parts:
        began = time.perf_counter()
        try:
            found = run_part(part, app_args, args.gemma)
        except Exception as error:  # one part's failure is a row, the others still run
            found = [Row(part, f"the {part} part", "", f"failed: {type(error).__name__}: {error}"[:300], False)]
        rows += found
        for row in found:
            print(f"  [{part}, {time.perf_counter() - began:.0f} s] {row.measure}: {row.measured}", flush=True)
    print(f"\nA stranger on 127.0.0.1 ({machine()}; load average {load_average()} after)\n")
    print("| measure | target | measured | |\n|---|---|---|---|")
    for row in rows:
        print(row.markdown())
    print(json.dumps({"app_args": args.app_args, "parts": parts}))


if __name__ == "__main__":
    main()
