"""How long an activation-patching sweep takes on SmolLM2: every layer x every position of the
residual stream, then every layer x head, each layer one batched pass (explorer/analysis/patching.py).
The pair is the usual one with the names swapped; prints the time and where the answer is carried.

    python bench/bench_patching.py

Prints a table; not a test. Target: the whole sweep (30 layers x ~20 positions) in <= 30 s here.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

import explorer
from explorer.analysis.patching import patching_sweep

PAIRS = [  # (clean, corrupted): the Patching tab's default pair, and one of 20 positions (the target's)
    ("When Mary and John went to the store, John gave a drink to",
     "When Mary and John went to the store, Mary gave a drink to"),
    ("When Mary and John went to the store after a long day at the office, John gave a drink",
     "When Mary and John went to the store after a long day at the office, Mary gave a drink"),
]  # fmt: skip


def main() -> None:
    torch.set_num_threads(2)
    loaded = explorer.load_model("smollm2-135m-instruct", progress=False)
    answer, other = (loaded.tokenizer.encode(word)[0] for word in (" Mary", " John"))
    for clean_text, corrupted_text in PAIRS:
        clean, corrupted = (
            explorer.GenerationSession(loaded, clean_text),
            explorer.GenerationSession(loaded, corrupted_text),
        )
        start = time.perf_counter()
        result = patching_sweep(clean, corrupted, answer, other)
        seconds = time.perf_counter() - start
        layers, positions = result.residual.shape
        print(f"\n{corrupted_text!r}")
        print(f"activation patching, SmolLM2-135M, {layers} layers x {positions} positions and {layers} x "
              f"{result.heads.shape[1]} heads: {seconds:.1f} s (target <= 30 s at 20 positions)")  # fmt: skip
        print(f"logit difference ' Mary' - ' John': clean {result.clean_difference:.2f}, "
              f"corrupted {result.corrupted_difference:.2f}")  # fmt: skip
        for name, grid, label in (("residual", result.residual, "position"), ("heads", result.heads, "head")):
            top = np.dstack(np.unravel_index(np.argsort(-grid, axis=None)[:5], grid.shape))[0]
            cells = ", ".join(
                f"L{layer} {result.positions[p] if label == 'position' else f'h{p}'!r}: {grid[layer, p]:.2f}"
                for layer, p in top
            )
            print(f"most restored by patching the {name}: {cells}")


if __name__ == "__main__":
    main()
