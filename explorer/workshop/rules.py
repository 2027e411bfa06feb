"""What a workshop accepts from a browser: room codes, names, answers, and the limits on each.

Everything here is checked on the server before it reaches the database; each refusal is a
sentence that says what to do.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass

from explorer.errors import InputError

CODE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: a code is read aloud and typed
CODE_LENGTH = 6
CODE = re.compile(f"[{CODE_LETTERS}]{{{CODE_LENGTH}}}")


class WorkshopError(InputError):
    """A workshop action refused; the message says why and what to do."""


class SeatGone(WorkshopError):
    """The workshop runs, but this student's seat is not in it (the teacher removed it): a page
    that had the seat says that, not that the workshop ended."""


@dataclass(frozen=True)
class Limits:
    """The bounds on what a workshop holds. A class behind one school router shares one address:
    the joins per address and minute leave room for a whole class joining at once."""

    workshops: int = 100  # live at once, on this database
    workshops_per_client: int = 3  # live at once, started from one address
    students: int = 100  # per workshop
    seats_per_address: int = 5  # seats one address holds in one workshop (the teacher may raise it)
    name_chars: int = 32
    typed_chars: int = 40  # a typed "next token" guess
    joins_per_minute: int = 120  # per address
    hours: float = 24.0  # a workshop and its answers are deleted this long after it started

    @classmethod
    def from_env(cls) -> Limits:
        """The defaults, with ``$DECODER_EXPLORER_WORKSHOP_HOURS`` and the other settings the docs list."""
        read = {
            "workshops": ("DECODER_EXPLORER_MAX_WORKSHOPS", int),
            "workshops_per_client": ("DECODER_EXPLORER_WORKSHOPS_PER_CLIENT", int),
            "students": ("DECODER_EXPLORER_MAX_STUDENTS", int),
            "seats_per_address": ("DECODER_EXPLORER_SEATS_PER_ADDRESS", int),
            "joins_per_minute": ("DECODER_EXPLORER_JOINS_PER_MINUTE", int),
            "hours": ("DECODER_EXPLORER_WORKSHOP_HOURS", float),
        }
        values = {}
        for field, (name, kind) in read.items():
            raw = os.environ.get(name)
            if raw:
                try:
                    values[field] = kind(raw)
                except ValueError as error:
                    raise ValueError(f"${name} must be a number, not {raw!r}") from error
                if values[field] <= 0:
                    raise ValueError(f"${name} must be above 0, not {raw!r}")
        return cls(**values)


def room_code(raw: object) -> str:
    """A room code as typed ("k7p-q2m", " K7PQ2M ", a link's "K7PQ2M/" or a sentence's "K7PQ2M.")
    in its one form; refused unless it could be one."""
    if not isinstance(raw, str) or len(raw) > 40:
        raise WorkshopError("Type the room code your teacher shows: six letters and digits, e.g. K7PQ2M.")
    code = re.sub(r"[\s\-/.,;:'\"]", "", raw).upper()
    if not CODE.fullmatch(code):
        raise WorkshopError(
            f"{raw.strip()[:12]!r} is not a room code: a code is six letters and digits, e.g. K7PQ2M. "
            "Check it with your teacher."
        )
    return code


def display_name(raw: object, limit: int) -> str:
    """A student's name: optional (empty is anonymous), at most ``limit`` characters, in any script.
    Refused: control characters, invisible ones (a name that shows nothing, or hides something:
    fillers, blank patterns, direction overrides), and a name that reads as "Teacher". It is text:
    whatever it holds is shown as text, never as markup or a link."""
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise WorkshopError("A name is text.")
    name = unicodedata.normalize("NFC", raw).strip()
    if len(name) > limit:
        raise WorkshopError(f"A name has at most {limit} characters (this one has {len(name)}): shorten it.")
    if not name:
        return ""
    if any(not _may_show(name, i) for i in range(len(name))) or not any(_visible(ch) for ch in name):
        raise WorkshopError("A name cannot hold control or invisible characters: type it again.")
    if "teacher" in skeleton(name):
        raise WorkshopError("A name cannot pose as the teacher: choose another one.")
    return name


# Letters and symbols that show nothing (fonts draw them blank), though Unicode calls them letters.
BLANKS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u17b4\u17b5\u034f\u180e\u2028\u2029")
JOINERS = frozenset("\u200c\u200d")  # ZWNJ (Persian, Hindi...) and ZWJ (emoji sequences): between letters only


def _visible(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LNPS" and ch not in BLANKS


def _may_show(name: str, i: int) -> bool:
    """Whether ``name[i]`` may stand there: a space between words, a joiner between two visible
    characters (an emoji's variation selector counts as one), any other character that is not
    a control, format, blank or unassigned one."""
    ch = name[i]
    if ch == " ":
        return True
    if ch in JOINERS:
        return 0 < i < len(name) - 1 and _visible_or_mark(name[i - 1]) and _visible_or_mark(name[i + 1])
    category = unicodedata.category(ch)
    return category[0] not in "CZ" and ch not in BLANKS


def _visible_or_mark(ch: str) -> bool:
    return _visible(ch) or (unicodedata.category(ch) in ("Mn", "Mc") and ch not in BLANKS)


# Letters of other scripts drawn like Latin ones (Unicode's confusables, the ones that spell "teacher").
CONFUSABLES = str.maketrans({
    "т": "t", "τ": "t", "ţ": "t", "е": "e", "ε": "e", "ё": "e", "а": "a", "α": "a", "ɑ": "a", "с": "c", "ϲ": "c",
    "ⅽ": "c", "н": "h", "һ": "h", "η": "h", "ր": "r", "г": "r", "ᴛ": "t", "ᴇ": "e", "ᴀ": "a", "ᴄ": "c", "ʜ": "h",
    "ʀ": "r", "ꭇ": "r", "ᴦ": "r", "3": "e", "4": "a", "€": "e", "@": "a", "7": "t", "+": "t", "ɾ": "r",
})  # fmt: skip


def skeleton(text: str) -> str:
    """How ``text`` reads: compatibility forms (fullwidth, small capitals) to plain letters, case and
    accents dropped, other scripts' look-alikes to Latin, everything but letters left out."""
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    plain = "".join(ch for ch in folded if not unicodedata.combining(ch)).translate(CONFUSABLES)
    return "".join(ch for ch in plain if "a" <= ch <= "z")


def typed_guess(raw: object, limit: int) -> str:
    """A typed next-token guess: some visible text, at most ``limit`` characters."""
    if not isinstance(raw, str) or not raw.strip():
        raise WorkshopError("Type the token you expect, or choose one of the candidates.")
    if len(raw) > limit:
        raise WorkshopError(f"A guess is one token: at most {limit} characters.")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") for ch in raw):
        raise WorkshopError("A guess cannot hold control or invisible characters.")
    return raw


def canonical(text: str) -> str:
    """A token's text as compared: the explorer's marks for spaces and line breaks (·, ⏎) as the
    characters, then trimmed. "·Paris", " Paris" and "Paris" are one guess."""
    return text.replace("·", " ").replace("⏎", "\n").strip()


def same_token(a: str, b: str) -> bool:
    return canonical(a) == canonical(b)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")
SEPARATORS = re.compile(r"[,;\t\r\n|]")  # where a spreadsheet may split a cell in two


def safe_cell(text: str) -> str:
    """A CSV cell that a spreadsheet reads as text (OWASP's CSV injection advice): a quote before it
    when it, or any piece of it a spreadsheet may split off (at , ; | a tab or a line break),
    starts like a formula once spaces are trimmed and fullwidth forms (＝) read as what they look
    like, or when it starts with a blank. The writer quotes every cell too (``csv.QUOTE_ALL``)."""
    pieces = [unicodedata.normalize("NFKC", piece).lstrip() for piece in SEPARATORS.split(text)]
    if text[:1].isspace() or any(piece.startswith(FORMULA_STARTS) for piece in pieces):
        return "'" + text
    return text


MARKDOWN_MARKS = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|`")


def plain_text(markdown: str) -> str:
    """A lesson's Markdown (``**Step**``, `` `code` ``) as the words it shows, for the CSV."""
    return re.sub(r"\\(.)", r"\1", MARKDOWN_MARKS.sub("", markdown))
