"""What the taps cost a cached SmolLM2 step: no run at all (nothing kept, nothing changed: every
tap is the identity), a run that visits every tap and keeps nothing, the session's own step
(keeps queries and keys), and a step with two heads zero-ablated. Interleaved in one process, so
the medians compare fairly on a shared, noisy machine.

    python bench/bench_taps.py [--steps 60]

Prints a table; not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import explorer
from explorer.model import NOTHING, Record, ablate_heads

PROMPT_TOKENS = 64
CASES = {
    "no run (nothing kept or changed)": {"record": NOTHING},
    "a run that keeps nothing": {"record": Record.taps("no such tap")},
    "the session's step (keeps q and k)": {"record": Record.of("qk")},
    "two heads zero-ablated": {"record": NOTHING, "interventions": ablate_heads({17: [3], 18: [6]})},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    torch.set_num_threads(2)
    model = explorer.load_model("smollm2-135m-instruct", progress=False).model
    times: dict[str, list[float]] = {name: [] for name in CASES}
    with torch.inference_mode():
        cache = model.new_cache()
        model(torch.arange(1000, 1000 + PROMPT_TOKENS)[None], cache=cache)  # (1, 64)
        token = torch.tensor([[1234]])  # (1, 1)
        for _ in range(args.steps):
            for name, options in CASES.items():
                start = time.perf_counter()
                model(token, cache=cache, last_only=True, **options)
                times[name].append((time.perf_counter() - start) * 1000)
                cache.truncate(PROMPT_TOKENS)  # every case steps from the same 64 positions
    base = statistics.median(times["no run (nothing kept or changed)"])
    print(f"cached SmolLM2 step after {PROMPT_TOKENS} positions, {args.steps} rounds, medians")
    print(f"{'case':40s} {'ms':>8s} {'ratio':>7s}")
    for name, values in times.items():
        print(f"{name:40s} {statistics.median(values):8.2f} {statistics.median(values) / base:7.2f}")


if __name__ == "__main__":
    main()
