"""Attribution, measured (explorer/analysis/attribution.py).

1. SmolLM2: how many integral points integrated gradients needs before completeness holds within
   1%, the error at 32 points, and the time (the points double from 32 while it does not hold).
2. The embedded translator on the 72 two-digit numbers ("twenty-one" -> "ein" "und" "zwanzig"):
   for each German number piece, is the source word integrated gradients ranks first the English
   word the piece translates? And per decoder layer: is the word cross-attention reads most
   (head average) that word, and is it the word the attribution ranks first?

    python bench/bench_attribution.py

Prints tables; not a test.
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
from explorer.analysis import attribution
from explorer.train.alignment import part_of, piece_spans, two_digit_cases

PROMPTS = [
    "The capital of France is",
    "One, two, three, four,",
    "When Mary and John went to the store, John gave a drink to",
    "def add(a, b):\n    return",
    "The cat sat on the mat. The dog sat on the",
]


def smollm2_table() -> None:
    loaded = explorer.load_model("smollm2-135m-instruct", progress=False)
    print("Integrated gradients on SmolLM2-135M (the token the first greedy step chose)")
    print(f"{'prompt':<44} {'token':>8} {'err@32':>8} {'points':>7} {'error':>7} {'time s':>7}")
    for text in PROMPTS:
        session = explorer.GenerationSession(loaded, text)
        session.step()
        position, token = attribution.chosen_at(session, len(session.token_ids) - 1)
        at_32 = attribution.attribute(session, position, token, max_steps=32)
        start = time.perf_counter()
        result = attribution.attribute(session, position, token)
        seconds = time.perf_counter() - start
        shown = repr(text)[:42]
        print(
            f"{shown:<44} {result.token!r:>8} {at_32.completeness_error:>8.2%} {result.steps:>7} "
            f"{result.completeness_error:>7.2%} {seconds:>7.1f}"
        )


def translator_table() -> None:
    loaded = explorer.load_model("en-de-numbers", progress=False)
    tokenizer, n_layers = loaded.tokenizer, loaded.config.n_layers
    pieces, ig_hits, attention_hits, agree = 0, 0, np.zeros(n_layers), np.zeros(n_layers)
    errors, start = [], time.perf_counter()
    for case in two_digit_cases():
        session = explorer.GenerationSession(loaded, case.english)
        target = tokenizer(text_target=case.german)["input_ids"]
        session.replay(target, forced=set(range(len(target))))  # teacher-forced: the right German
        source_parts = [part_of(s, case.english_spans) for s in piece_spans(tokenizer, session.source_ids)]
        target_parts = [part_of(s, case.german_spans) for s in piece_spans(tokenizer, target)]
        for t, part in enumerate(target_parts):
            if part is None:
                continue  # "und", the end token
            result = attribution.attribute(session, t, target[t])  # position t writes target[t]
            errors.append(result.completeness_error)
            top = int(np.argmax(result.source_scores))
            rows = attribution.cross_attention_rows(session, t)  # (layers, S)
            pieces += 1
            ig_hits += source_parts[top] == part
            for layer in range(n_layers):
                read = int(rows[layer].argmax())
                attention_hits[layer] += source_parts[read] == part
                agree[layer] += source_parts[read] == source_parts[top]
    seconds = time.perf_counter() - start
    print(f"\nThe translator on the 72 two-digit numbers: {pieces} German number pieces ({seconds:.0f} s)")
    print(f"integrated gradients' top source word is the aligned one: {ig_hits / pieces:.1%}")
    print(f"completeness error: median {np.median(errors):.2%}, worst {np.max(errors):.2%}")
    print(f"{'layer':>5} {'attention reads the aligned word':>34} {'attention and attribution agree':>33}")
    for layer in range(n_layers):
        print(f"{layer:>5} {attention_hits[layer] / pieces:>34.1%} {agree[layer] / pieces:>33.1%}")


def main() -> None:
    torch.set_num_threads(2)
    smollm2_table()
    translator_table()


if __name__ == "__main__":
    main()
