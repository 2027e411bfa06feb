"""How a callback is wired to the page: ``on`` turns its name-keyed updates into the
component-keyed ones Gradio wants, and ``Wiring`` is what a tab's ``wire`` receives."""

from __future__ import annotations

import functools
import inspect
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import gradio as gr

from explorer.ui import events
from explorer.ui.page import Page
from explorer.ui.tab import PROFILE_ENV, log


def on(page: Page, callback: Callable) -> Callable:
    """``callback`` as Gradio calls it: its name-keyed updates become component-keyed.

    The wrapper keeps the callback's signature (Gradio reads it for gr.Request, gr.Progress
    and gr.SelectData) and, for a generator, is a generator itself (Gradio streams those).
    After the callback, each feature's hook (``page.after_event``, set by the app from the
    registry ``explorer.ui.features``) sees its inputs and updates. With ``$DECODER_EXPLORER_PROFILE``
    set, it logs how long each callback took (bench/bench_ui.py reads these lines for its
    server/transport/browser breakdown)."""
    name = getattr(callback, "__name__", "callback")

    def by_component(updates, args, started: float):
        for hook in page.after_event:
            hook(args, updates)
        if os.environ.get(PROFILE_ENV):
            log.info("profile %s %.1f ms", name, (time.perf_counter() - started) * 1000)
        if not isinstance(updates, dict) or updates.get("__type__") == "update":  # gr.skip()
            return updates
        return {getattr(page, key): value for key, value in updates.items()}

    if inspect.isgeneratorfunction(callback):

        @functools.wraps(callback)
        def streamed(*args, **kwargs):
            updates = callback(*args, **kwargs)
            try:
                while True:
                    started = time.perf_counter()
                    try:
                        value = next(updates)
                    except StopIteration:
                        return
                    yield by_component(value, args, started)
            finally:  # Gradio closes this one when it cancels the run (Stop): the callback's cleanup runs now
                updates.close()

        return streamed

    @functools.wraps(callback)
    def called(*args, **kwargs):
        started = time.perf_counter()
        return by_component(callback(*args, **kwargs), args, started)

    return called


@dataclass
class Wiring:
    """What a tab needs to wire its own events: the page, every figure a change of view redraws,
    and the settings for events whose progress shows on the status line only."""

    page: Page
    figures: list  # the components of every tab's figures (what opening another tab redraws)
    quick: dict  # show_progress on the status line only: a spinner over every figure would flash
    restored: set = field(default_factory=set)  # what a restored session changes (every view and setting)
    settings: list = field(default_factory=list)  # the settings a new session reads (render.SETTINGS)
    new_model: set = field(default_factory=set)  # what another model changes
    demo: gr.Blocks | None = None  # the Blocks being built (a feature's own load events: demo.load)
    loaded: gr.events.Dependency | None = None  # the page's load event (a feature's load runs after it: .then)

    def on(self, callback: Callable) -> Callable:
        return on(self.page, callback)

    def picks_query(self, picker) -> None:
        """A token picked in ``picker`` (the strip, or a row of a heatmap: its position is the
        event's index) becomes the query, and the open tab's figures are drawn for it."""
        page = self.page
        picker.select(self.on(events.on_token_click), [page.state], [page.strip, *self.figures], **self.quick)
