"""English -> German pairs for numbers, dates, times and quantities, made by well-kept libraries.

num2words and babel (CLDR) write both sides, so the German is the libraries' correct rendering
and the English takes the forms people type (``forms.py`` adds the everyday notations and the
small numbers). Each example carries its category, the value it renders and its template; the
split is by value alone (``pairs.split_of``), so that no test number or date is ever seen in
training in any of its forms, and the templates in ``forms.NEW_FORMS`` are never trained on.
"""

from __future__ import annotations

import datetime as dt
import random

from .forms import NEW_FORMS, typed_forms
from .pairs import SPLITS, Pair, clean, number_key, split_of

CATEGORIES = ("cardinal", "number", "ordinal", "year", "date", "time", "currency", "unit")
UNITS = [
    "length-kilometer", "length-meter", "length-centimeter", "length-mile", "mass-kilogram", "mass-gram",
    "volume-liter", "duration-hour", "duration-minute", "duration-day", "temperature-celsius",
]  # fmt: skip
CURRENCIES = ["USD", "EUR", "GBP"]
DATE_FORMATS = ["full", "long", "medium", "short", "MMMMd"]


def cardinals(rng: random.Random, n_values: int) -> list[Pair]:
    from num2words import num2words

    values = sorted(set(range(100)) | set(rng.sample(range(100, 10_000), n_values)))
    pairs = []
    for n in values:
        german = num2words(n, lang="de")
        english = num2words(n)
        pairs.append(Pair(english, german, "cardinal", str(n)))
        if " and " in english:  # "three hundred forty-two" is typed as often as "... and ..."
            pairs.append(Pair(english.replace(" and ", " "), german, "cardinal", str(n)))
        if n < 100 and "-" in english:  # and "twenty one" as often as "twenty-one"
            pairs.append(Pair(english.replace("-", " "), german, "cardinal", str(n)))
    return pairs


def numbers(rng: random.Random, n_values: int) -> list[Pair]:
    """Digits: German groups thousands with '.' and writes the decimal comma."""
    from babel.numbers import format_decimal

    pairs = []
    for _ in range(n_values):
        if rng.random() < 0.7:
            n = rng.choice([rng.randrange(10_000), rng.randrange(10_000_000)])
        else:
            n = round(rng.randrange(100_000) / rng.choice([10, 100]), 2)
        german = clean(format_decimal(n, locale="de_DE"))
        english = clean(format_decimal(n, locale="en_US"))
        pairs.append(Pair(english, german, "number", number_key(n)))
        if "," in english:
            pairs.append(Pair(english.replace(",", ""), german, "number", number_key(n)))
    return pairs


def ordinals(rng: random.Random) -> list[Pair]:
    from num2words import num2words

    pairs = []
    for n in range(1, 1000):
        german_words = num2words(n, lang="de", to="ordinal")
        pairs.append(Pair(num2words(n, to="ordinal"), german_words, "ordinal", str(n)))
        pairs.append(Pair(num2words(n, to="ordinal_num"), f"{n}.", "ordinal", str(n)))
    return pairs


def years(rng: random.Random) -> list[Pair]:
    from num2words import num2words

    pairs = []
    for y in range(1100, 2100):
        pairs.append(Pair(num2words(y, to="year"), num2words(y, lang="de", to="year"), "year", str(y)))
        if rng.random() < 0.3:
            pairs.append(Pair(f"in {y}", f"im Jahr {y}", "year", str(y)))
    return pairs


def dates(rng: random.Random, n_values: int) -> list[Pair]:
    from babel.dates import format_date, format_skeleton

    start = dt.date(1900, 1, 1).toordinal()
    end = dt.date(2099, 12, 31).toordinal()
    pairs = []
    for ordinal in rng.sample(range(start, end), n_values):
        day = dt.date.fromordinal(ordinal)
        for fmt in rng.sample(DATE_FORMATS, 2):
            if fmt == "medium" and day.month == 5:
                fmt = "long"  # "May" has no short form: "May 4, 2017" is medium and long; one German for it
            if fmt == "MMMMd":
                en, de = format_skeleton(fmt, day, locale="en_US"), format_skeleton(fmt, day, locale="de_DE")
            else:
                en, de = format_date(day, fmt, locale="en_US"), format_date(day, fmt, locale="de_DE")
            pairs.append(Pair(clean(en), clean(de), "date", day.isoformat()))
    return pairs


def times(rng: random.Random) -> list[Pair]:
    """Every minute of the day, in the three ways people type a time: "3:45 PM", "3:45pm", "at 3:45 PM".

    Turning the 12-hour clock into the 24-hour one is arithmetic on the hour; with one form per
    minute the model saw too few examples of each hour to learn it.
    """
    from babel.dates import format_time

    pairs = []
    for minute in range(24 * 60):
        t = dt.time(minute // 60, minute % 60)
        german = clean(format_time(t, "short", locale="de_DE"))
        english = clean(format_time(t, "short", locale="en_US"))
        typed = english.replace(" AM", "am").replace(" PM", "pm")
        for en, de in ((english, german), (typed, german), (f"at {english}", f"um {german}")):
            pairs.append(Pair(en, de, "time", t.isoformat()))
    return pairs


def currencies(rng: random.Random, n_values: int) -> list[Pair]:
    from babel.numbers import format_currency

    pairs = []
    for _ in range(n_values):
        amount = rng.choice([rng.randrange(1, 1000), rng.randrange(1, 1_000_000) / 100])
        code = rng.choice(CURRENCIES)
        en = clean(format_currency(amount, code, locale="en_US"))
        de = clean(format_currency(amount, code, locale="de_DE"))
        pairs.append(Pair(en, de, "currency", number_key(amount)))
    return pairs


def units(rng: random.Random, n_values: int) -> list[Pair]:
    from babel.units import format_unit

    pairs = []
    for _ in range(n_values):
        value = rng.choice([1, rng.randrange(2, 1000), rng.randrange(1, 10_000) / 10])
        unit = rng.choice(UNITS)
        en = clean(format_unit(value, unit, locale="en_US", length="long"))
        de = clean(format_unit(value, unit, locale="de_DE", length="long"))
        pairs.append(Pair(en, de, "unit", number_key(value)))
    return pairs


def typed_variants(pair: Pair, rng: random.Random) -> list[Pair]:
    """How people type: a final period (capitals need no examples: the tokenizer folds case)."""
    if rng.random() < 0.3:
        return [Pair(pair.english + ".", pair.german + ".", pair.category, pair.value, pair.form)]
    return []


def build_dataset(seed: int = 0, scale: float = 1.0) -> dict[str, list[Pair]]:
    """All pairs, deduplicated, split by value; ``new_forms`` holds the templates never trained
    on. ``scale`` shrinks it (tests use a tiny one)."""
    rng = random.Random(seed)

    def size(n: int) -> int:
        return max(5, int(n * scale))

    every = typed_forms(rng, scale) + (
        cardinals(rng, size(6000)) + numbers(rng, size(5000)) + ordinals(rng) + years(rng)
        + dates(rng, size(9000)) + times(rng) + currencies(rng, size(5000)) + units(rng, size(6000))
    )  # fmt: skip
    if scale < 1:
        every = rng.sample(every, max(len(CATEGORIES) * 10, int(len(every) * scale)))
    splits: dict[str, list[Pair]] = {name: [] for name in (*SPLITS, "new_forms")}
    seen: set[str] = set()
    for pair in every:
        split = "new_forms" if pair.form in NEW_FORMS else split_of(pair.value)
        candidates = [pair] + (typed_variants(pair, rng) if split == "train" else [])
        for p in candidates:
            if p.english not in seen:  # one German rendering per English text
                seen.add(p.english)
                splits[split].append(p)
    for pairs in splits.values():
        rng.shuffle(pairs)
    return splits
