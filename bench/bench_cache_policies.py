"""Cache policies on SmolLM2-135M-Instruct: what a step costs, what the cache holds, and the
budget curve (teacher-forced perplexity by policy and budget against the full cache).

    python bench/bench_cache_policies.py [--positions 1000] [--steps 16] [--no-curve]

Prints tables; not a test. Targets (issue 29): a step under window or sinks + window at 1,000
positions costs at most the full cache's step (it reads less); the cost of a window step does not
grow with the position (a slot is overwritten, nothing is copied); bytes held at 1,000 positions
under sinks 4 + window 128 <= 15% of the full cache's. Quantized steps' cost is reported (they
dequantize what they read). The text is assets/texts/declaration-of-independence.txt.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "assets" / "texts" / "declaration-of-independence.txt"


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def speed_table(loaded, ids: list[int], positions: int, steps: int) -> None:
    import explorer
    from explorer import cache_policies as cp

    text = loaded.tokenizer.decode(ids[:positions])
    forced = ids[positions : positions + steps]  # the same tokens for every policy
    policies = [cp.full(), cp.window(128), cp.sinks(4, 128), cp.quantized(8), cp.quantized(4)]
    sessions = {}
    for policy in policies:
        start = time.perf_counter()
        sessions[policy.label()] = explorer.GenerationSession(loaded, text, cache_policy=policy, record_attention=False)
        print(f"  prefill under {policy.label()}: {time.perf_counter() - start:.1f} s", flush=True)
    times: dict[str, list[float]] = {label: [] for label in sessions}
    for token in forced:  # round robin: each policy's step beside the others', on a noisy machine
        for label, session in sessions.items():
            start = time.perf_counter()
            session.force(token)
            times[label].append((time.perf_counter() - start) * 1000)
    full_ms, full_bytes = statistics.median(times["full cache"]), sessions["full cache"].cache_bytes
    print(f"\nA step at {positions:,} positions (median of {steps} forced steps, policies in turn):")
    print(f"{'policy':<42}{'ms / step':>10}{'x full':>8}{'bytes held':>14}{'of full':>9}")
    for label, session in sessions.items():
        ms, held = statistics.median(times[label]), session.cache_bytes
        print(f"{label:<42}{ms:>10.1f}{ms / full_ms:>8.2f}{held:>14,}{held / full_bytes:>9.1%}")


def flat_window_table(loaded, ids: list[int], steps: int) -> None:
    """A window step costs the same at 300 and at 1,000 positions: no copy grows with the length.
    The two sessions step in turn, so that the machine's noise falls on both alike."""
    import explorer
    from explorer import cache_policies as cp

    sessions = {}
    for positions in (300, 1000):
        text = loaded.tokenizer.decode(ids[:positions])
        sessions[positions] = explorer.GenerationSession(
            loaded, text, cache_policy=cp.window(128), record_attention=False
        )
    times: dict[int, list[float]] = {positions: [] for positions in sessions}
    for i in range(steps):
        for positions, session in sessions.items():
            start = time.perf_counter()
            session.force(ids[positions + i])
            times[positions].append((time.perf_counter() - start) * 1000)
    print("\nwindow 128: a step's cost by position (a slot overwritten, nothing copied; in turn):")
    for positions, ms in times.items():
        print(f"  at {positions:>5,} positions: {statistics.median(ms):6.1f} ms")


def curve_table(loaded, ids: list[int]) -> None:
    from explorer import cache_policies as cp

    start = time.perf_counter()
    rows = cp.budget_curve(loaded, ids, budgets=(32, 64, 128, 256))
    elapsed = time.perf_counter() - start
    full = next(r for r in rows if r.policy == "full")
    print(f"\nBudget curve: {len(ids):,} tokens teacher-forced, positions > 256 scored ({elapsed:.0f} s):")
    print(f"{'policy':<42}{'budget':>7}{'bytes held':>13}{'perplexity':>12}{'x full':>8}")
    for r in rows:
        budget = "all" if r.budget is None else r.budget
        print(f"{r.label:<42}{budget:>7}{r.bytes:>13,}{r.perplexity:>12.3f}{r.perplexity / full.perplexity:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--no-curve", action="store_true")
    parser.add_argument("--curve-tokens", type=int, default=0, help="score the first N tokens only (0: all)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    import explorer

    loaded = explorer.load_model("smollm2-135m-instruct", progress=False)
    ids = loaded.tokenizer(TEXT.read_text(), add_special_tokens=False)["input_ids"]
    print(f"CPU: {cpu_name()}; torch {torch.__version__}; {len(ids):,} tokens of {TEXT.name}")
    speed_table(loaded, ids, args.positions, args.steps)
    flat_window_table(loaded, ids, args.steps)
    if not args.no_curve:
        curve_table(loaded, ids[: args.curve_tokens] if args.curve_tokens else ids)


if __name__ == "__main__":
    main()
