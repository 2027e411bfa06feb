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


@dataclass(frozen=True)
class Limits:
    """The bounds on what a workshop holds. A class behind one school router shares one address:
    the joins per address and minute leave room for a whole class joining at once."""

    workshops: int = 100  # live at once, on this database
    students: int = 100  # per workshop
    name_chars: int = 32
    typed_chars: int = 40  # a typed "next token" guess
    joins_per_minute: int = 120  # per address
    hours: float = 24.0  # a workshop and its answers are deleted this long after it started

    @classmethod
    def from_env(cls) -> Limits:
        """The defaults, with ``$DECODER_EXPLORER_WORKSHOP_HOURS`` and the other settings the docs list."""
        read = {
            "workshops": ("DECODER_EXPLORER_MAX_WORKSHOPS", int),
            "students": ("DECODER_EXPLORER_MAX_STUDENTS", int),
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
    """A room code as typed ("k7p-q2m", " K7PQ2M ") in its one form; refused unless it could be one."""
    if not isinstance(raw, str) or len(raw) > 40:
        raise WorkshopError("Type the room code your teacher shows: six letters and digits, e.g. K7PQ2M.")
    code = re.sub(r"[\s-]", "", raw).upper()
    if not CODE.fullmatch(code):
        raise WorkshopError(
            f"{raw.strip()[:12]!r} is not a room code: a code is six letters and digits, e.g. K7PQ2M. "
            "Check it with your teacher."
        )
    return code


def display_name(raw: object, limit: int) -> str:
    """A student's name: optional (empty is anonymous), at most ``limit`` characters, no control
    or invisible characters. It is text: whatever it holds is shown as text, never as markup."""
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise WorkshopError("A name is text.")
    name = unicodedata.normalize("NFC", raw).strip()
    if len(name) > limit:
        raise WorkshopError(f"A name has at most {limit} characters (this one has {len(name)}): shorten it.")
    if any(unicodedata.category(ch).startswith("C") for ch in name):
        raise WorkshopError("A name cannot hold control or invisible characters: type it again.")
    return name


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


def safe_cell(text: str) -> str:
    """A CSV cell that a spreadsheet reads as text: one that starts like a formula gets a quote."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
