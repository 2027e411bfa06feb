"""Workshops: a teacher leads a lesson, the class predicts, then sees the answer (``service``);
kept in a database (``database``); what a browser may send (``rules``); the questions put from
the live model (``questions``)."""

from explorer.workshop.database import DATABASE_URL_ENV, connect, default_url
from explorer.workshop.rules import Limits, WorkshopError, room_code
from explorer.workshop.service import Pulse, Question, Seat, Started, StudentRound, Tally, Workshops

__all__ = [
    "DATABASE_URL_ENV", "Limits", "Pulse", "Question", "Seat", "Started", "StudentRound", "Tally", "WorkshopError",
    "Workshops", "connect", "default_url", "room_code",
]  # fmt: skip
