"""What the translator is checked on besides its held-out split: what people type first.

``small_number_checks`` is exhaustive (every cardinal 0-100 and ordinal 1-100 in words, the
digits 0-100, "1st" to "31st"); ``FIRST_INPUTS`` are the everyday inputs a new user tried,
with the German the training data's rules write for them.
"""

from __future__ import annotations

from .forms import ordinal_suffix
from .pairs import Pair


def small_number_checks() -> list[Pair]:
    from num2words import num2words

    pairs = [Pair(num2words(n), num2words(n, lang="de"), "cardinal", str(n), "cardinal words") for n in range(101)]
    pairs += [
        Pair(num2words(n, to="ordinal"), num2words(n, lang="de", to="ordinal"), "ordinal", str(n), "ordinal words")
        for n in range(1, 101)
    ]
    pairs += [Pair(str(n), str(n), "number", str(n), "digits") for n in range(101)]
    pairs += [Pair(f"{n}{ordinal_suffix(n)}", f"{n}.", "ordinal", str(n), "ordinal digits") for n in range(1, 32)]
    return pairs


FIRST_INPUTS = [
    Pair(en, de, "typed", "", "first inputs")
    for en, de in [
        ("first", "erste"), ("third", "dritte"), ("twelfth", "zwölfte"), ("zero", "null"), ("ten", "zehn"),
        ("twelve", "zwölf"), ("thirteen", "dreizehn"), ("nineteen", "neunzehn"), ("twenty-four", "vierundzwanzig"),
        ("one million", "eine Million"), ("a thousand", "tausend"), ("3/3/2021", "03.03.2021"),
        ("12:30", "12:30"), ("7 am", "7 Uhr"), ("5 km", "5 km"), ("$5", "5 $"), ("10%", "10 %"), ("-7", "-7"),
        ("January 2026", "Januar 2026"), ("Monday", "Montag"), ("twenty-one", "einundzwanzig"),
        ("the 21st", "der 21."), ("€20", "20 €"), ("7:15pm", "19:15"), ("noon", "12 Uhr mittags"),
        ("2.5 million", "2,5 Millionen"), ("25 °C", "25 °C"), ("3-5 km", "3-5 km"), ("2021-03-03", "03.03.2021"),
        ("the 3rd of May", "der 3. Mai"), ("£3.50", "3,50 £"), ("5 dollars", "5 Dollar"), ("3.14", "3,14"),
    ]
]  # fmt: skip
