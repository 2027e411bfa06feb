"""The forms people type first, with their German: small numbers and everyday notations.

A person at the explorer types "twenty-four", "first", "5 km", "$5", "7 am" or "3/3/2021"
before anything else. Small numbers are vocabulary rather than a pattern to generalise, so every
cardinal 0-100 and ordinal 1-100 is generated in every form and always trained on. The other
forms (units and symbols, money, clock times, numeric dates, percentages, ranges, round numbers)
are generated from values like the rest of the data, and some templates are kept out of
training entirely (``NEW_FORMS``): the model is scored on them separately, as the honest
measure of forms it never saw.

The German is written by num2words and babel (CLDR) where they have the form, and by the few
fixed rules below where they do not ("7 am" -> "7 Uhr", "$5" -> "5 $").
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable

from .pairs import Pair, clean, number_key

# Templates never trained on: each combines pieces the model has seen in other templates.
NEW_FORMS = (
    "time-at-24h",  # "at 14:30": "at 3:45 PM", "14:30" and "until 14:30" are trained
    "time-at-hour-attached",  # "at 7pm": "7pm" and "at 7 pm" are trained
    "date-on-numeric",  # "on 3/3/2021": "on March 3, 2021", "3/3/2021" and "until 3/3/2021" are trained
    "date-in-month-year",  # "in May 2021": "in May" and "May 2021" are trained
    "percent-negative",  # "-2.5%": "-2.5" and "2.5%" are trained
    "unit-between",  # "between 3 and 5 km": "between 3 and 5" and "3 to 5 km" are trained
)
SYMBOLS = {"USD": ("$", "Dollar", "dollar", "dollars"), "EUR": ("€", "Euro", "euro", "euros"),
           "GBP": ("£", "Pfund", "pound", "pounds")}  # fmt: skip
SHORT_UNITS = [
    "length-kilometer", "length-meter", "length-centimeter", "length-mile", "mass-kilogram", "mass-gram",
    "volume-liter", "temperature-celsius",
]  # fmt: skip
WEEKDAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
WEEKDAYS_DE = ["Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag"]
ORDINAL_SUFFIX = {1: "st", 2: "nd", 3: "rd"}
# The forms that are vocabulary on their own ("twelve", "third", "7", "21st", "Monday", "noon",
# "a thousand"): training repeats them (``translator.with_vocabulary_repeated``).
VOCABULARY_FORMS = frozenset({
    "small-words", "small-ordinal-words", "small-digits", "small-ordinal-digits", "weekday", "month", "time-words",
    "round-words",
})  # fmt: skip


def ordinal_suffix(n: int) -> str:
    return "th" if 10 <= n % 100 <= 20 else ORDINAL_SUFFIX.get(n % 10, "th")


def de_number(value: float, pattern: str | None = None) -> str:
    """German digits: '.' groups thousands, ',' is the decimal mark."""
    from babel.numbers import format_decimal

    return clean(format_decimal(value, format=pattern, locale="de_DE"))


def en_number(value: float, pattern: str | None = None) -> str:
    from babel.numbers import format_decimal

    return clean(format_decimal(value, format=pattern, locale="en_US"))


# ---------------------------------------------------------------- small numbers: always trained
def small_numbers() -> list[Pair]:
    """Every cardinal 0-100 and ordinal 1-100, in words and digits, as people write them."""
    from num2words import num2words

    pairs = []
    for n in range(101):
        words, german = num2words(n), num2words(n, lang="de")
        pairs += [
            Pair(words, german, "cardinal", str(n), "small-words"),
            Pair(str(n), str(n), "number", str(n), "small-digits"),
        ]
        if "-" in words:  # "twenty one" is typed as often as "twenty-one"
            pairs.append(Pair(words.replace("-", " "), german, "cardinal", str(n), "small-words"))
        if n == 0:
            continue
        pairs += [
            Pair(f"-{n}", f"-{n}", "number", str(-n), "small-digits"),
            Pair(num2words(-n), num2words(-n, lang="de"), "cardinal", str(-n), "small-words"),
        ]
        ordinal, ordinal_de = num2words(n, to="ordinal"), num2words(n, lang="de", to="ordinal")
        digits = f"{n}{ordinal_suffix(n)}"
        pairs += [
            Pair(ordinal, ordinal_de, "ordinal", str(n), "small-ordinal-words"),
            Pair(digits, f"{n}.", "ordinal", str(n), "small-ordinal-digits"),
            Pair(f"the {digits}", f"der {n}.", "ordinal", str(n), "small-ordinal-digits"),
            Pair(f"the {ordinal}", f"der {ordinal_de}", "ordinal", str(n), "small-ordinal-words"),
        ]
        if "-" in ordinal:
            pairs.append(Pair(ordinal.replace("-", " "), ordinal_de, "ordinal", str(n), "small-ordinal-words"))
    return pairs


def fixed_words() -> list[Pair]:
    """Words with one meaning: weekdays, months, noon and midnight. Always trained."""
    from babel.dates import format_date

    pairs = []
    for en, de in zip(WEEKDAYS_EN, WEEKDAYS_DE, strict=True):
        pairs += [
            Pair(en, de, "date", f"word:{en}", "weekday"),
            Pair(f"on {en}", f"am {de}", "date", f"word:{en}", "weekday"),
        ]
    for month in range(1, 13):
        day = dt.date(2001, month, 1)
        en, de = format_date(day, "MMMM", locale="en_US"), format_date(day, "MMMM", locale="de_DE")
        pairs += [
            Pair(en, de, "date", f"word:{en}", "month"),
            Pair(f"in {en}", f"im {de}", "date", f"word:{en}", "month"),
        ]
    for en, de in (("noon", "12 Uhr mittags"), ("midnight", "Mitternacht")):
        pairs += [
            Pair(en, de, "time", f"word:{en}", "time-words"),
            Pair(f"at {en}", f"um {de}", "time", f"word:{en}", "time-words"),
        ]
    return pairs


# ---------------------------------------------------------------- typed forms, from values
def unit_forms(rng: random.Random) -> list[Pair]:
    """'5 km', '5km', '25 °C', '3-5 km', '3 to 5 km', 'between 3 and 5 km'."""
    from babel.units import format_unit

    value = rng.choice([rng.randrange(1, 1000), rng.randrange(1, 10_000) / 10])
    unit = rng.choice(SHORT_UNITS)
    en = clean(format_unit(value, unit, locale="en_US", length="short"))
    de = clean(format_unit(value, unit, locale="de_DE", length="short"))
    symbol = de.split(" ", 1)[1]
    key = number_key(value)
    pairs = [Pair(en, de, "unit", key, "unit-short"), Pair(en.replace(" ", ""), de, "unit", key, "unit-short")]
    if "°" in en:
        pairs.append(Pair(en.replace("°", " °"), de, "unit", key, "unit-short"))
    low, high = sorted(rng.sample(range(1, 100), 2))
    en_symbol = en.removeprefix(en_number(value)).strip()
    pairs += [
        Pair(f"{low}-{high} {en_symbol}", f"{low}-{high} {symbol}", "unit", str(high), "unit-range"),
        Pair(f"{low} to {high} {en_symbol}", f"{low} bis {high} {symbol}", "unit", str(high), "unit-range"),
        Pair(f"between {low} and {high} {en_symbol}", f"zwischen {low} und {high} {symbol}", "unit", str(high),
             "unit-between"),
    ]  # fmt: skip
    return pairs


def currency_forms(rng: random.Random) -> list[Pair]:
    """'$5', '5 dollars', '€20', '20€', '£3.50', '3.50 pounds'."""
    code = rng.choice(list(SYMBOLS))
    symbol, german_name, one, many = SYMBOLS[code]
    amount = rng.choice([rng.randrange(1, 1000), rng.randrange(1, 100_000) / 100])
    whole = float(amount).is_integer()
    en_amount = en_number(amount) if whole else en_number(amount, pattern="#,##0.00")
    de_amount = de_number(amount) if whole else de_number(amount, pattern="#,##0.00")
    name = one if amount == 1 else many
    key = number_key(amount)
    return [
        Pair(f"{symbol}{en_amount}", f"{de_amount} {symbol}", "currency", key, "currency-symbol"),
        Pair(f"{en_amount}{symbol}", f"{de_amount} {symbol}", "currency", key, "currency-symbol"),
        Pair(f"{en_amount} {symbol}", f"{de_amount} {symbol}", "currency", key, "currency-symbol"),
        Pair(f"{en_amount} {name}", f"{de_amount} {german_name}", "currency", key, "currency-words"),
    ]


def time_forms(rng: random.Random) -> list[Pair]:
    """'7 am', '7am', '7 pm', 'at 7 pm', '7 o'clock', 'at 9', '14:30', '7:05', 'at 14:30', 'at 7pm',
    'until 14:30', 'from 14:30'."""
    hour24, minute = rng.randrange(24), rng.randrange(60)
    hour12 = hour24 % 12 or 12
    half = "am" if hour24 < 12 else "pm"
    key = dt.time(hour24, minute).isoformat()
    clock = f"{hour24:02d}:{minute:02d}"  # babel's German short time
    hour_key = dt.time(hour24).isoformat()
    return [
        Pair(f"{hour12} {half}", f"{hour24} Uhr", "time", hour_key, "time-hour"),
        Pair(f"{hour12}{half}", f"{hour24} Uhr", "time", hour_key, "time-hour"),
        Pair(f"at {hour12} {half}", f"um {hour24} Uhr", "time", hour_key, "time-hour"),
        Pair(f"at {hour12}{half}", f"um {hour24} Uhr", "time", hour_key, "time-at-hour-attached"),
        Pair(f"{hour12} o'clock", f"{hour12} Uhr", "time", dt.time(hour12 % 12).isoformat(), "time-hour"),
        Pair(f"at {hour12}", f"um {hour12}", "time", dt.time(hour12 % 12).isoformat(), "time-hour"),
        Pair(f"{hour24}:{minute:02d}", clock, "time", key, "time-24h"),
        Pair(f"at {hour24}:{minute:02d}", f"um {clock}", "time", key, "time-at-24h"),
        # A word before a clock time shifts every digit one position: seen with these words,
        # the reordering is learnt wherever the time starts (and "at 14:30" can be new).
        Pair(f"until {hour24}:{minute:02d}", f"bis {clock}", "time", key, "time-prefixed-24h"),
        Pair(f"from {hour24}:{minute:02d}", f"ab {clock}", "time", key, "time-prefixed-24h"),
    ]


def date_forms(rng: random.Random) -> list[Pair]:
    """'3/3/2021', '2021-03-03', 'March 2021', 'the 3rd of May', 'May 3rd', 'on March 3, 2021',
    'until 3/3/2021'."""
    from babel.dates import format_date, format_skeleton

    day = dt.date.fromordinal(rng.randrange(dt.date(1900, 1, 1).toordinal(), dt.date(2099, 12, 31).toordinal()))
    key = day.isoformat()
    numeric = format_date(day, "dd.MM.y", locale="de_DE")
    month_en, month_de = format_date(day, "MMMM", locale="en_US"), format_date(day, "MMMM", locale="de_DE")
    month_year_de = format_skeleton("yMMMM", day, locale="de_DE")
    nth = f"{day.day}{ordinal_suffix(day.day)}"
    long_en, long_de = format_date(day, "long", locale="en_US"), format_date(day, "long", locale="de_DE")
    us = f"{day.month}/{day.day}/{day.year}"
    return [
        Pair(us, numeric, "date", key, "date-numeric"),
        Pair(f"{day.month:02d}/{day.day:02d}/{day.year}", numeric, "date", key, "date-numeric"),
        Pair(key, numeric, "date", key, "date-iso"),
        Pair(format_skeleton("yMMMM", day, locale="en_US"), month_year_de, "date", key[:7], "date-month-year"),
        Pair(f"the {nth} of {month_en}", f"der {day.day}. {month_de}", "date", key[5:], "date-day-month"),
        Pair(f"{nth} of {month_en}", f"{day.day}. {month_de}", "date", key[5:], "date-day-month"),
        Pair(f"{month_en} {nth}", f"{day.day}. {month_de}", "date", key[5:], "date-day-month"),
        Pair(f"on {month_en} {day.day}", f"am {day.day}. {month_de}", "date", key[5:], "date-on"),
        Pair(f"on {long_en}", f"am {long_de}", "date", key, "date-on"),
        Pair(f"on {us}", f"am {numeric}", "date", key, "date-on-numeric"),
        Pair(f"until {us}", f"bis {numeric}", "date", key, "date-prefixed-numeric"),  # see time_forms
        Pair(f"from {us}", f"ab {numeric}", "date", key, "date-prefixed-numeric"),
        Pair(f"in {month_en} {day.year}", f"im {month_year_de}", "date", key[:7], "date-in-month-year"),
    ]


def number_forms(rng: random.Random) -> list[Pair]:
    """Decimals, negatives, percentages, ranges, and round numbers ('a thousand', '2.5 million')."""
    from num2words import num2words

    decimal = round(rng.randrange(1, 100_000) / 10 ** rng.choice([1, 2, 3]), 3)
    whole = rng.randrange(101, 100_000)
    negative = -rng.choice([rng.randrange(1, 1000), decimal])
    percent = rng.choice([rng.randrange(1, 101), round(rng.randrange(1, 1000) / 10, 1)])
    low, high = sorted(rng.sample(range(1, 1000), 2))
    pairs = [
        Pair(en_number(decimal), de_number(decimal), "number", number_key(decimal), "number-decimal"),
        Pair(en_number(negative), de_number(negative), "number", number_key(negative), "number-negative"),
        Pair(f"-{whole}", de_number(-whole), "number", str(-whole), "number-negative"),
        Pair(f"{en_number(percent)}%", f"{de_number(percent)} %", "number", number_key(percent), "percent"),
        Pair(f"{en_number(percent)} percent", f"{de_number(percent)} Prozent", "number", number_key(percent),
             "percent"),
        Pair(f"-{en_number(percent)}%", f"-{de_number(percent)} %", "number", number_key(-percent), "percent-negative"),
        Pair(f"{low} to {high}", f"{low} bis {high}", "number", str(high), "number-range"),
        Pair(f"between {low} and {high}", f"zwischen {low} und {high}", "number", str(high), "number-range"),
    ]  # fmt: skip
    if isinstance(percent, int):
        words = f"{num2words(percent)} percent"
        pairs.append(Pair(words, f"{num2words(percent, lang='de')} Prozent", "number", str(percent), "percent"))
    negative_int = -rng.randrange(1, 1000)
    pairs.append(Pair(num2words(negative_int), num2words(negative_int, lang="de"), "cardinal", str(negative_int),
                      "number-negative"))  # fmt: skip
    return pairs + round_numbers(rng)


def round_numbers(rng: random.Random) -> list[Pair]:
    """'a thousand', 'two million', '2 million', '2.5 million', '3 billion'."""
    from num2words import num2words

    scale, de_one, de_many, power = rng.choice([("million", "Million", "Millionen", 6), ("billion", "Milliarde",
                                                "Milliarden", 9)])  # fmt: skip
    count = rng.choice([rng.randrange(1, 1000), round(rng.randrange(11, 1000) / 10, 1)])
    de_name = de_one if count == 1 else de_many
    key = number_key(count * 10**power)
    pairs = [Pair(f"{en_number(count)} {scale}", f"{de_number(count)} {de_name}", "number", key, "round")]
    if isinstance(count, int) and count < 100:
        pairs.append(Pair(f"{num2words(count)} {scale}", num2words(count * 10**power, lang="de"), "cardinal", key,
                          "round"))  # fmt: skip
    return pairs


ROUND_WORDS = [
    ("a hundred", "hundert"), ("a thousand", "tausend"), ("one thousand", "eintausend"), ("a million", "eine Million"),
    ("one million", "eine Million"), ("a billion", "eine Milliarde"), ("one billion", "eine Milliarde"),
]  # fmt: skip


def round_words() -> list[Pair]:
    """'a hundred', 'a thousand', 'one million': always trained."""
    return [Pair(en, de, "cardinal", f"word:{en}", "round-words") for en, de in ROUND_WORDS]


TYPED_FORMS: list[tuple[Callable[[random.Random], list[Pair]], int]] = [
    (unit_forms, 1500), (currency_forms, 1500), (time_forms, 1000), (date_forms, 1200), (number_forms, 1500),
]  # fmt: skip


def typed_forms(rng: random.Random, scale: float = 1.0) -> list[Pair]:
    """Small numbers and fixed words first (they win a clash of English texts), then the rest."""
    pairs = small_numbers() + fixed_words() + round_words()
    for make, count in TYPED_FORMS:
        for _ in range(max(3, int(count * scale))):
            pairs += make(rng)
    return pairs
