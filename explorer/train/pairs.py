"""One English -> German training pair, and the key that decides its split."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

SPLITS = {"train": 0.90, "validation": 0.05, "test": 0.05}
SMALL = 100  # whole numbers up to this size are vocabulary: always trained, in every form


@dataclass(frozen=True)
class Pair:
    english: str
    german: str
    category: str
    value: str  # what is rendered: a number ("342", "2.5"), a date, a time, or "word:..."; the split key
    form: str = "plain"  # the template the English was written in ("unit-short", "time-hour", ...)


def clean(text: str) -> str:
    """CLDR uses narrow and non-breaking spaces; people type plain ones."""
    return " ".join(text.replace("\u202f", " ").replace("\xa0", " ").split())


def number_key(value: float) -> str:
    """One key per number however it is typed: 5, 5.0 and 5.00 are the same value."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def always_trained(value: str) -> bool:
    """Words with one meaning, whole hours ("7 am", "19:00"), and whole numbers up to SMALL, in
    any form and category: vocabulary, not values to generalise to."""
    if value.startswith("word:") or (len(value) == 8 and value.endswith(":00:00")):
        return True
    try:
        return abs(int(value)) <= SMALL
    except ValueError:
        return False


def split_of(value: str) -> str:
    """train, validation or test, by the value alone: 24 typed as "24", "twenty-four" or
    "twenty-fourth" is one value, so no test value is ever seen in training in any form."""
    if always_trained(value):
        return "train"
    u = int.from_bytes(hashlib.sha1(value.encode()).digest()[:8], "big") / 2**64
    edge = 0.0
    for name, share in SPLITS.items():
        edge += share
        if u < edge:
            return name
    return "train"
