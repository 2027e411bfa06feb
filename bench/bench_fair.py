"""Fair CPU and bounded answers (issue 58, items 3 and 4): what a stranger's long texts cost an
honest visitor's Step, and what ``/attention`` over a long text costs the server.

Through the app (network cut off, as in the tests), every client speaking the page's queue
protocol (tests/browser/page_client.py), each with its own address (X-Forwarded-For from the
app's trusted proxy, 127.0.0.1 here):

1. quiet: one honest visitor steps a short SmolLM2 text ``--steps`` times (a pause between):
   the Step round trip's p50 and p95;
2. the same while two strangers, from two addresses, send Steps with a new ~1,000-token text
   each time (each a prefill of the whole text), without pause;
3. ``/attention`` on a ~1,000-token text: the server's time and the answer's bytes, or its refusal.

Prints a table; not a test (machines are shared and noisy: compare the ratios within one run).

    python bench/bench_fair.py [--steps 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from tests.browser.conftest import ARTIFACTS, running_app  # noqa: E402
from tests.browser.load import SETTINGS  # noqa: E402
from tests.browser.page_client import PageClient  # noqa: E402

MODEL = "smollm2-135m-instruct"
HONEST_TEXT = "The capital of France is"
SOURCE = (
    "When in the course of human events it becomes necessary for one people to dissolve the political bands "
    "which have connected them with another and to assume among the powers of the earth"
)
WORDS = SOURCE.split(" ")


def long_text(variant: int, words: int = 900) -> str:
    """~1,000 tokens of SmolLM2 (900 words), a new text for each ``variant`` (a new prefill)."""
    return f"Text {variant}: " + " ".join(WORDS[(i * 7 + variant) % len(WORDS)] for i in range(words))


def client_from(url: str, address: str) -> PageClient:
    client = PageClient(url)
    client.http.headers["X-Forwarded-For"] = address
    return client


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def honest_steps(url: str, steps: int, pause_s: float = 0.3) -> list[float]:
    client = client_from(url, "10.0.0.1")
    client.predict(MODEL, HONEST_TEXT, *SETTINGS, None, api_name="/on_load")
    times = []
    for _ in range(steps):
        time.sleep(pause_s)
        begun = time.perf_counter()
        client.predict(HONEST_TEXT, *SETTINGS, api_name="/on_step")
        times.append((time.perf_counter() - begun) * 1000)
        if len(times) % 20 == 0:  # a fresh session now and then: the text never nears its end
            client.predict(HONEST_TEXT, *SETTINGS, api_name="/on_reset")
    client.close()
    return times


def stranger(url: str, address: str, stop: threading.Event, done: dict) -> None:
    """Steps with a new long text each time, without pause, until ``stop``."""
    client = client_from(url, address)
    client.predict(MODEL, HONEST_TEXT, *SETTINGS, None, api_name="/on_load")
    variant = 0
    while not stop.is_set():
        variant += 1
        try:
            client.predict(long_text(variant * 10 + int(address[-1])), *SETTINGS, api_name="/on_step")
            done["calls"] = done.get("calls", 0) + 1  # a prefill, or told to wait for its other one
        except Exception as error:  # counted
            done["errors"] = done.get("errors", 0) + 1
            done["last_error"] = str(error)[:120]
    client.close()


def attention_call(url: str, tokens: int) -> tuple[float, int, str]:
    """``/attention`` on a long text (plain HTTP, Gradio's call API): seconds, bytes, and its outcome."""
    text = long_text(7)
    with httpx.Client(base_url=url, timeout=600) as http:
        begun = time.perf_counter()
        # All eight inputs (query_from 0, query_to None: every row); a server without them ignores the last two.
        asked = [MODEL, text, [], 3, "mean", "self", 0, None]
        called = http.post("/gradio_api/call/attention", json={"data": asked})
        event = called.json()["event_id"]
        body = http.get(f"/gradio_api/call/attention/{event}").text
        seconds = time.perf_counter() - begun
    outcome = "refused" if "event: error" in body else "answered"
    said = ""
    for line in body.splitlines():
        if line.startswith("data:") and outcome == "refused":
            said = line[5:].strip()[:160]
    return seconds, len(body.encode()), said or outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    log = ARTIFACTS / "bench_fair_app.log"
    env = {"DECODER_EXPLORER_TRUSTED_PROXY": "127.0.0.1", "DECODER_EXPLORER_PROFILE": "1"}
    with running_app(log, **env) as (url, _process):
        honest_steps(url, 5)  # warm: the model loaded, the first passes run
        quiet = honest_steps(url, args.steps)
        stop, done = threading.Event(), {}
        strangers = [threading.Thread(target=stranger, args=(url, a, stop, done)) for a in ("10.0.9.1", "10.0.9.2")]
        for thread in strangers:
            thread.start()
        time.sleep(3)  # both strangers' first prefills under way
        loaded = honest_steps(url, args.steps)
        stop.set()
        for thread in strangers:
            thread.join()
        seconds, size, said = attention_call(url, 1000)

    print(f"\nAn honest Step (SmolLM2, {args.steps} steps, 0.3 s apart) quiet and beside two strangers' long texts")
    print(f"{'':<34} {'p50 ms':>8} {'p95 ms':>8}")
    for name, times in (("quiet", quiet), ("two strangers' 1,000-token texts", loaded)):
        print(f"{name:<34} {statistics.median(times):>8.0f} {percentile(times, 0.95):>8.0f}")
    ratio = percentile(loaded, 0.95) / percentile(quiet, 0.95)
    print(f"p95 ratio {ratio:.2f}x (target <= 2x); strangers: {json.dumps(done)}")
    print(f"\n/attention on a ~1,000-token text: {seconds:.2f} s, {size:,} bytes: {said}")


if __name__ == "__main__":
    main()
