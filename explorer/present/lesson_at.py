"""The Lessons panel's slice of a tab's state (``ExplorerState.lesson``): the lesson step on screen.
The page's lesson events (``explorer.ui.lesson_events``) set it; the workshop reads it."""

from __future__ import annotations

from dataclasses import dataclass

from explorer import lessons
from explorer.analysis import snapshot
from explorer.session import GenerationSession


@dataclass(frozen=True)
class LessonAt:
    """The lesson step a tab is on, its question as the model answered it, and what the lesson
    replaced: the user's own session, one click away ("Back to your text")."""

    number: int
    index: int
    posed: lessons.Posed
    model_name: str  # the model the question was posed on
    session: GenerationSession  # the session the step put on screen
    set_up_tokens: int  # how many tokens that session had then (more: the user stepped on)
    before: snapshot.Snapshot | None = None  # the user's session the lesson replaced
    shown: snapshot.Snapshot | None = None  # the step's own view as set up: what its question is about
    checked: bool = False  # a learner alone pressed Check: what the question covered is shown again
