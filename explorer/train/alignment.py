"""Does cross-attention point at the English word a German piece translates?

German puts the units before the tens: "twenty-one" -> "einundzwanzig". For every two-digit
number that is not a multiple of ten, each German piece is labelled with the English word it
comes from (the units word or the tens word; "und" and the end token are not scored). A hit is
when the head-averaged cross-attention of the decoder step that writes the piece has its
maximum on a source piece of that English word.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

UNITS_EN = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TENS_EN = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
UNITS_DE = ["", "ein", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"]
TENS_DE = ["", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig"]


@dataclass
class AlignmentCase:
    english: str  # "twenty-one"
    german: str  # "einundzwanzig"
    english_spans: dict[str, tuple[int, int]]  # "units"/"tens" -> character span in english
    german_spans: dict[str, tuple[int, int]]  # the same parts in german


def two_digit_cases() -> list[AlignmentCase]:
    cases = []
    for tens in range(2, 10):
        for units in range(1, 10):
            en = f"{TENS_EN[tens]}-{UNITS_EN[units]}"
            de = f"{UNITS_DE[units]}und{TENS_DE[tens]}"
            en_spans = {"tens": (0, len(TENS_EN[tens])), "units": (len(TENS_EN[tens]) + 1, len(en))}
            de_spans = {"units": (0, len(UNITS_DE[units])), "tens": (len(UNITS_DE[units]) + 3, len(de))}
            cases.append(AlignmentCase(en, de, en_spans, de_spans))
    return cases


def piece_spans(tokenizer, ids: list[int]) -> list[tuple[int, int] | None]:
    """Character span of each piece in the decoded text (None for special tokens)."""
    spans, position = [], 0
    special = set(tokenizer.all_special_ids)
    for token_id in ids:
        if token_id in special:
            spans.append(None)
            continue
        piece = tokenizer.convert_ids_to_tokens(token_id).replace("▁", "")
        spans.append((position, position + len(piece)))
        position += len(piece)
    return spans


def part_of(span: tuple[int, int] | None, parts: dict[str, tuple[int, int]]) -> str | None:
    """The part that holds most of a piece's characters."""
    if span is None:
        return None
    best, best_overlap = None, 0
    for name, (a, b) in parts.items():
        overlap = min(span[1], b) - max(span[0], a)
        if overlap > best_overlap:
            best, best_overlap = name, overlap
    return best


def alignment_accuracy(cross_attention_of, tokenizer, n_layers: int) -> list[float]:
    """Hit rate per decoder layer.

    ``cross_attention_of(source_ids, target_ids)`` returns (layers, heads, T, S) cross-attention
    of a teacher-forced pass where the decoder input is [start] + target_ids[:-1], so that
    row t is the step that writes target_ids[t].
    """
    hits = np.zeros(n_layers)
    total = 0
    for case in two_digit_cases():
        source = tokenizer(case.english)["input_ids"]
        target = tokenizer(text_target=case.german)["input_ids"]
        attention = cross_attention_of(source, target).mean(axis=1)  # (layers, T, S)
        source_parts = [part_of(s, case.english_spans) for s in piece_spans(tokenizer, source)]
        target_parts = [part_of(s, case.german_spans) for s in piece_spans(tokenizer, target)]
        for t, part in enumerate(target_parts):
            if part is None:
                continue  # "und", the end token
            total += 1
            for layer in range(n_layers):
                hits[layer] += source_parts[int(attention[layer, t].argmax())] == part
    return list(hits / max(total, 1))
