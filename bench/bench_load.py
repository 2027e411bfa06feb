"""A class at once: twenty users stepping the embedded models together, and the server's memory.

Starts the app (network cut off, as in the tests), then
1. one user alone steps SmolLM2 to 512 positions: step latency and the server's peak RSS;
2. twenty users (half SmolLM2, half the translator) load at once and step 30 tokens each:
   errors, cross-talk, median and p95 step latency, the server's peak RSS.
Prints a table; not a test (machines are shared and noisy).

    python bench/bench_load.py [--users 20] [--steps 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import ARTIFACTS, running_app  # noqa: E402
from tests.browser.load import SETTINGS, simulate_users  # noqa: E402

LONG_PROMPT = " ".join(
    f"Line {i}: the explorer shows every layer and head, and the cache keeps keys and values." for i in range(24)
)


def peak_rss_mb(pid: int) -> float:
    """The process's high-water mark of resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def one_long_session(url: str, positions: int) -> tuple[int, list[float]]:
    from gradio_client import Client

    client = Client(url, verbose=False, download_files=False)
    client.predict("smollm2-135m-instruct", LONG_PROMPT, *SETTINGS, None, api_name="/on_load")
    latencies, reached = [], 0
    for _ in range(positions):
        begin = time.perf_counter()
        try:
            result = client.predict(LONG_PROMPT, *SETTINGS, api_name="/on_step")
        except Exception:  # the end token or the cap: the session is as long as it gets
            break
        latencies.append((time.perf_counter() - begin) * 1000)
        status = next(v for v in result if isinstance(v, str) and "generated" in v)
        reached = int(status.split(" tokens")[0].split()[-1].replace(",", "")) if "tokens" in status else reached
        if reached >= positions:
            break
    return reached, latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--positions", type=int, default=512)
    args = parser.parse_args()
    with running_app(ARTIFACTS / "bench-load-app.log") as (url, server):
        pid = server.pid
        idle_mb = peak_rss_mb(pid)
        reached, single = one_long_session(url, args.positions)
        single_mb = peak_rss_mb(pid)
        report = simulate_users(url, args.users, args.steps)
        load_mb = peak_rss_mb(pid)
    p95 = sorted(single)[int(0.95 * (len(single) - 1))] if single else float("nan")
    print(f"\nServer under load: {args.users} users x {args.steps} steps (half SmolLM2, half the translator)")
    print(f"{'measure':52s} {'value':>10s}")
    rows = [
        ("peak RSS after start, before any model (MB)", f"{idle_mb:.0f}"),
        (f"one user, SmolLM2 to {reached} positions: step median (ms)", f"{statistics.median(single):.0f}"),
        ("one user: step p95 (ms)", f"{p95:.0f}"),
        ("peak RSS with that session (MB)", f"{single_mb:.0f}"),
        (f"{args.users} users: step median (ms)", f"{report.median:.0f}"),
        (f"{args.users} users: step p95 (ms)", f"{report.percentile(0.95):.0f}"),
        (f"{args.users} users: errors", str(len(report.errors))),
        (f"{args.users} users: cross-talk", str(len(report.crosstalk))),
        (f"{args.users} users: wall time (s)", f"{report.seconds:.0f}"),
        ("peak RSS of the server over the whole run (MB)", f"{load_mb:.0f}"),
    ]
    for name, value in rows:
        print(f"{name:52s} {value:>10s}")
    for line in (report.errors + report.crosstalk)[:10]:
        print("  ", line)
    print("targets: zero errors and cross-talk; one 512-token session <= 1500 MB")


if __name__ == "__main__":
    main()
