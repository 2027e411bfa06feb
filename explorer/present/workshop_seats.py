"""Which part a browser tab plays in a workshop, as its ``ExplorerState.workshop`` holds it.

Set only by the server, after the teacher's secret or the student's token was checked against the
database: what a browser sends later never sets it. Its kept copy in the browser
(``kept_seat``) is read back as untrusted input and checked again (``explorer.ui.workshop_events``).
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.workshop import Seat


@dataclass
class Leading:
    """This tab is the teacher's: what it shows is published for the class."""

    code: str
    secret: str
    lesson: int
    published: str = ""  # the view last published (JSON): not written again while it is the same
    note: tuple[int, str] = (0, "")  # (a question's id, what asking it did first): said under that question


@dataclass
class Following:
    """This tab is a student's. ``following``: the teacher's view is applied as it changes;
    ``applied``: the view the tab last took from the teacher (JSON), to tell when the student moved
    away on their own (then they explore, and "Back to where the teacher is" brings them back)."""

    seat: Seat
    following: bool = True
    version: int = -1  # the lead version applied
    applied: str = ""
    taken: str = ""  # the teacher's view (JSON) as it was read then: a version that changed only the question leaves it


def kept_seat(seat: Leading | Following | None) -> dict | None:
    """What the browser keeps of the tab's seat, for a reload or a server restart."""
    if isinstance(seat, Leading):
        return {"code": seat.code, "role": "teacher", "secret": seat.secret}
    if isinstance(seat, Following):  # (following: a reload leaves a student exploring on their own)
        return {"code": seat.seat.code, "role": "student", "token": seat.seat.token, "following": seat.following}
    return None


def in_class(st) -> bool:
    """Whether the tab is in a workshop, a student's or the teacher's: its lesson answers go through
    the workshop, where the teacher reveals them to everyone at once."""
    return st is not None and isinstance(getattr(st, "workshop", None), Following | Leading)
