"""One feature of the page, a view tab or a panel, as one record of one contract.

    name          what the registry (explorer.ui.features) and the tests call it
    layout(page, place)   its components at one of its places, added to the page by name
    wire(wiring)  its own events
    figures(st)   what it draws for a tab's state (a Step redraws the open tab's)
    state         the field of ExplorerState that is its slice, if it has one
    places        where the frame lays it out: "top" (the top row's first column), "settings"
                  (an accordion among the settings), "settings-end" (after the settings); a
                  view tab's place is its own gr.Tab (the frame lays out the tab registry)
    styles        its own style files in explorer/ui/static/, added to the page's
    after_event(args, updates)   called after every event of the page, with the event's inputs
                  and the name-keyed updates its callback returned (the workshop publishes a
                  teacher's new view from here)

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


@dataclass(frozen=True)
class Feature:
    name: str
    layout: Callable[[Page, str], None] | None = None
    wire: Callable[[Wiring], None] | None = None
    figures: Callable[[ExplorerState], Updates] | None = None
    state: str | None = None  # its slice: a field of ExplorerState
    places: tuple[str, ...] = ()  # where the frame lays it out
    styles: tuple[str, ...] = ()  # file names in explorer/ui/static/
    after_event: AfterEvent | None = None
