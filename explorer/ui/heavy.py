"""The page's side of the admission of heavy work (``explorer/admission.py``): whose job it is (the
client's address, as the workshop counts it), whether its client is still there (Gradio's queue
marks an event whose stream closed), and where it waits (a toast: "Waiting for 2 other long
jobs…"). ``heavy_event`` marks a callback that runs the model over a whole text (Compare, the
lab's runs, the budget curve, a two-models read); ``heavy_job`` wraps a part of one (a long
prefill, a model's first load).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import gradio as gr

from explorer.admission import ADMISSION, HEAVY_POSITIONS, Job
from explorer.ui.gradio_private import this_event_gone, this_request
from explorer.ui.workshop_gate import address_of

# A text longer than this (characters) is a heavy prefill: ~4 characters a token, HEAVY_POSITIONS tokens.
HEAVY_TEXT_CHARS = 4 * HEAVY_POSITIONS


def client() -> str:
    """Whom the event this thread runs counts as: its address ("local" outside an event)."""
    request = this_request()
    return address_of(request) if request is not None else "local"


def told(message: str) -> None:
    """Where a job waits, in the page's toast (the log outside an event)."""
    gr.Info(message, duration=5)


@contextlib.contextmanager
def heavy_job(what: str) -> Iterator[Job]:
    """The block as this client's heavy job ``what`` ("A prefill of a long text"): it waits for a
    place (saying where), is refused with a sentence, or is cancelled when the client has gone."""
    with ADMISSION.heavy(client(), what, gone=this_event_gone, told=told) as job:
        yield job


def heavy_if(is_heavy: bool, what: str) -> contextlib.AbstractContextManager:
    """``heavy_job(what)`` when ``is_heavy``, else nothing."""
    return heavy_job(what) if is_heavy else contextlib.nullcontext()


def long_text(text) -> bool:
    """Whether a prefill of ``text`` is heavy work."""
    return isinstance(text, str) and len(text) > HEAVY_TEXT_CHARS


def heavy_event(what: str) -> Callable[[Callable], Callable]:
    """A callback that runs as one heavy job ``what`` (put it under ``tab_event``, which shows a
    refusal as a warning). Its ``__wrapped__`` is the callback: Gradio reads its parameters."""

    def decorate(handler: Callable) -> Callable:
        @functools.wraps(handler)
        def run(*args, **kwargs):
            with heavy_job(what):
                return handler(*args, **kwargs)

        return run

    return decorate
