"""Does a translator know the words of a source sentence? A cheap check before translating.

The embedded translator was trained on numbers, dates, times, amounts and quantities only. Given
"I like cats" it still writes confident German, which means nothing. Its training script keeps
every English word the training data holds (``known_words.json`` beside the weights); a source
with other words gets a note beside the output instead of nonsense without comment.
"""

from __future__ import annotations

import re

WORD = re.compile(r"[a-z]+")  # the tokenizer folds case; digits and symbols are not words
UNK_SHOWN = 5  # unseen words named in the note, at most


def words_of(text: str) -> list[str]:
    """The words of a text, lower-cased, in order: "At 3:45PM" -> ["at", "pm"]."""
    return WORD.findall(text.lower())


def unseen_words(known: frozenset[str], text: str) -> list[str]:
    """The words of ``text`` that training never saw, each once, in order."""
    return list(dict.fromkeys(w for w in words_of(text) if w not in known))


def domain_note(known: frozenset[str] | None, text: str) -> str | None:
    """A sentence for the user when the source holds words the model never saw; else None."""
    if known is None:
        return None
    unseen = unseen_words(known, text)
    if not unseen:
        return None
    named = ", ".join(f"“{w}”" for w in unseen[:UNK_SHOWN]) + (" …" if len(unseen) > UNK_SHOWN else "")
    return (
        f"⚠ This translator never saw {named} in training: it knows numbers, dates, times, amounts "
        "and quantities only, so its German for this text is a guess that means nothing. Try one of "
        "the example sentences."
    )
