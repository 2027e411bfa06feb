"""One feature of the page, a view tab or a panel, as one record of one contract.

    name          what the registry (explorer.ui.features) and the tests call it
    layout(page, place)   its components at one of its places, added to the page by name
    wire(wiring)  its own events
    figures(st)   what it draws for a tab's state (a Step redraws the open tab's)
    state         the field of ExplorerState that is its slice, if it has one
    places        where it is laid out: the frame's "hidden" (never shown: what the page keeps in
                  the browser, what its scripts read and press), "top" (the top row's first
                  column), "workbench" (the left column, above the tokens), "settings" (an
                  accordion among the settings), "settings-end" (after the settings); or a
                  place another feature opens inside itself (``page.lay_out``); a view tab's
                  place is its own gr.Tab (the frame lays out the tab registry)
    styles        its own style files in explorer/ui/static/, added to the page's
    scripts       its own client code: each a JavaScript function of the page's helpers (its static
                  file, with what it needs from Python filled in), called by the page's script
    after_event(args, updates)   called after every event of the page, with the event's inputs
                  and the name-keyed updates its callback returned (the workshop publishes a
                  teacher's new view from here)
    routes(app)   adds its own routes to the app (Gradio's FastAPI app, once it is launched)
    opens(request, inputs, progress)   the page's first load opened its own way (a lesson's link):
                  the updates, or None when the address is not its to open; ``inputs`` are the
                  load's (the settings, then the session the browser kept)
    opens_views   the names of its components that its opening changes besides the session's views

The page's frame (layout.py, app.py, wiring.py) reads features only through this record, so that
a feature is one module and one line of the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for the annotations only: the frame imports this module
    from explorer.present.views import ExplorerState
    from explorer.ui.page import Page
    from explorer.ui.wiring import Wiring

Updates = dict[str, object]  # what a callback returns: values keyed by the page's component names
AfterEvent = Callable[[tuple, object], None]
Opens = Callable[..., "Updates | None"]  # (gr.Request, the load's inputs, gr.Progress)


@dataclass(frozen=True)
class Feature:
    name: str
    layout: Callable[[Page, str], None] | None = None
    wire: Callable[[Wiring], None] | None = None
    figures: Callable[[ExplorerState], Updates] | None = None
    state: str | None = None  # its slice: a field of ExplorerState
    places: tuple[str, ...] = ()  # where the frame lays it out
    styles: tuple[str, ...] = ()  # file names in explorer/ui/static/
    scripts: tuple[str, ...] = ()  # JavaScript texts: "page => { ... }"
    after_event: AfterEvent | None = None
    routes: Callable[[object], None] | None = None  # its argument: the app (FastAPI)
    opens: Opens | None = None
    opens_views: tuple[str, ...] = ()
