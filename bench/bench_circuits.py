"""QK and OV circuits, timed on SmolLM2-135M (explorer/analysis/circuits).

At 200 tokens: the traced pass the circuits read (once per text), then one cell's decomposition
(why_attends), a whole query row (every key), what a head carries, a head's composition, each
with the pass already kept (warm) and, for a cell, from cold (the pass included). Targets: one
cell <= 200 ms, a row <= 2 s.

    python bench/bench_circuits.py

Prints a table; not a test.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import explorer
from explorer.analysis.circuits import traced, why_row
from explorer.analysis.circuits.traced import _KEPT

TOKENS = 200
REPEATS = 3


def best_of(call) -> float:
    """The fastest of REPEATS runs, in ms."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def session_of(loaded, n_tokens: int) -> explorer.GenerationSession:
    words = " ".join(f"word{i % 37} and" for i in range(n_tokens))
    ids = loaded.tokenizer(words)["input_ids"][:n_tokens]
    return explorer.GenerationSession(loaded, loaded.tokenizer.decode(ids))


def main() -> None:
    torch.set_num_threads(max(1, torch.get_num_threads()))
    loaded = explorer.load_model("smollm2-135m-instruct", progress=False)
    session = session_of(loaded, TOKENS)
    n = len(session.token_ids)
    query, layer, head = n - 1, 17, 3

    def cold_cell():
        _KEPT.pop(session, None)
        explorer.why_attends(session, layer, head, query, query - 1)

    rows = [
        ("traced pass (once per text)", lambda: (_KEPT.pop(session, None), traced(session))),
        ("one cell, cold (pass included)", cold_cell),
        ("one cell, warm", lambda: explorer.why_attends(session, layer, head, query, query - 1)),
        ("one cell, layer 29, warm", lambda: explorer.why_attends(session, 29, head, query, query - 1)),
        ("a whole row, warm", lambda: why_row(session, layer, head, query, list(range(n)))),
        ("a whole row, layer 29, warm", lambda: why_row(session, 29, head, query, list(range(n)))),
        ("what it carries, warm", lambda: explorer.what_it_carries(session, layer, head, query)),
        ("composition, warm", lambda: explorer.composition(session, layer, head)),
    ]
    print(f"SmolLM2-135M, {n} tokens, layer {layer} head {head}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}")  # fmt: skip
    print(f"{'what':<34} {'best of 3 (ms)':>15}")
    traced(session)
    for name, call in rows:
        print(f"{name:<34} {best_of(call):>15.0f}")


if __name__ == "__main__":
    main()
