"""Twenty strangers' sessions against the sessions' memory budget (issue 58, item 2).

Through the app (network cut off, as in the tests), 20 raw clients speaking Gradio's queue protocol
(tests/browser/page_client.py: no browser, so no heartbeat and no unload), one after another, each
opening SmolLM2 on a ~1,000-token text and stepping once. Prints the server's resident memory
(VmRSS) after the first session and after all 20, the growth over the first, how many sessions the
keeper put aside (its log), and whether each put-aside session steps again with its own tokens.
The issue's target: growth <= 700 MB under ``--session-memory-mb 500`` (2.9 GB before it).
Not a test: one run, printed; machines are shared and noisy.

    python bench/bench_sessions.py                     # --session-memory-mb 500
    python bench/bench_sessions.py --memory-mb 0       # no budget given: the app's default
    python bench/bench_sessions.py --root /path/to/another/checkout   # the same clients at other code
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_stranger import settled_rss_mb as settled_mb  # noqa: E402
from tests.browser import conftest  # noqa: E402
from tests.browser.conftest import ARTIFACTS, running_app  # noqa: E402
from tests.browser.load import SETTINGS, outputs_by_label  # noqa: E402
from tests.browser.page_client import PageClient  # noqa: E402

MODEL = "smollm2-135m-instruct"
# 1,015 SmolLM2 tokens (~4.3 KB), as the stranger sent.
TEXT = " ".join(f"Sentence {i} says that the quick brown fox jumps over the lazy dog." for i in range(64))
CLIENTS = 20


def strip(client: PageClient, api_name: str, values) -> list[str]:
    return [text for text, _ in outputs_by_label(client, api_name, values)["strip"]]


def run(memory_mb: float, log_path: Path) -> dict:
    env = {"DECODER_EXPLORER_SESSION_MEMORY_MB": f"{memory_mb:g}"} if memory_mb else {}
    with running_app(log_path, **env) as (url, server):
        idle = settled_mb(server.pid, 1.0)
        clients, kept = [], []
        started = time.perf_counter()
        for i in range(CLIENTS):
            client = PageClient(url)
            client.predict(MODEL, TEXT, *SETTINGS, None, api_name="/on_load")
            kept.append(strip(client, "/on_step", client.predict(TEXT, *SETTINGS, api_name="/on_step")))
            clients.append(client)
            if i == 0:
                first = settled_mb(server.pid)
        filled_s = time.perf_counter() - started
        after = settled_mb(server.pid)
        put_aside = log_path.read_text().count("put aside an idle session")
        # Each client steps again: a put-aside session is read again from its own tokens first.
        same = 0
        for client, before in zip(clients, kept, strict=True):
            now = strip(client, "/on_step", client.predict(TEXT, *SETTINGS, api_name="/on_step"))
            same += now[: len(before)] == before and len(now) == len(before) + 1
        brought_back = log_path.read_text().count("read again from its")
        for client in clients:
            client.close()
    return {
        "idle_mb": idle, "first_mb": first, "after_mb": after, "growth_mb": after - first, "tokens": len(kept[0]),
        "put_aside": put_aside, "brought_back": brought_back, "same_tokens": same, "filled_s": filled_s,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-mb", type=float, default=500, help="--session-memory-mb for the app (0: not set)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose app.py runs (default: this one)")
    args = parser.parse_args()
    conftest.ROOT = args.root.resolve()  # running_app starts ROOT/app.py
    log_path = ARTIFACTS / "bench-sessions-app.log"
    log_path.unlink(missing_ok=True)
    r = run(args.memory_mb, log_path)
    budget = f"{args.memory_mb:g} MB" if args.memory_mb else "not set"
    print(f"\n{CLIENTS} raw clients, SmolLM2, {r['tokens']} tokens each, budget {budget}, app at {args.root}")
    print("| measure | value |\n|---|---|")
    print(f"| resident, no session | {r['idle_mb']:,.0f} MB |")
    print(f"| resident, after the first session | {r['first_mb']:,.0f} MB |")
    print(f"| resident, after {CLIENTS} sessions | {r['after_mb']:,.0f} MB |")
    print(f"| growth over the first (target <= 700 MB) | {r['growth_mb']:,.0f} MB |")
    print(f"| sessions put aside | {r['put_aside']} |")
    print(f"| stepped again with their own tokens | {r['same_tokens']} of {CLIENTS} ({r['brought_back']} read again) |")
    print(f"| {CLIENTS} sessions opened in | {r['filled_s']:.0f} s |")


if __name__ == "__main__":
    main()
