"""The Workshop panel as a feature: its layout (``layout``: the panel, inside the Lessons panel,
and what the page keeps and its scripts read), its events (``wiring``; the callbacks are
``explorer.ui.workshop_events``), its routes (a student's question and answer, the long poll, the
download), its slice of the state (``ExplorerState.workshop``, a ``Leading`` or ``Following``
seat) and its hook after every event of the page."""

from __future__ import annotations

from explorer.present.views import ExplorerState
from explorer.present.workshop_seats import Following, Leading
from explorer.ui.feature import Feature
from explorer.ui.panels.workshop import layout, wiring
from explorer.ui.workshop_events import add_routes, as_json, publish


def after_event(args: tuple, updates: object) -> None:
    """After an event of a tab that changed its view (``updates`` holds "kept", the view the
    browser keeps): a teacher's tab publishes it; a student's tab that moved away from the
    teacher's view on its own stops following (the next sync says so)."""
    if not isinstance(updates, dict) or "kept" not in updates:
        return
    st = updates.get("state") if isinstance(updates.get("state"), ExplorerState) else None
    st = st or next((a for a in args if isinstance(a, ExplorerState)), None)
    seat = getattr(st, "workshop", None)
    if isinstance(seat, Leading) and st.session is not None:
        publish(st, seat)
    elif isinstance(seat, Following) and seat.following and seat.applied and isinstance(updates.get("kept"), dict):
        seat.following = as_json(updates["kept"]) == seat.applied


WORKSHOP = Feature(
    "workshop",
    layout=layout.layout,
    wire=wiring.wire,
    state="workshop",
    places=("hidden", "lessons"),
    styles=("workshop.css",),
    scripts=(wiring.SCRIPT,),
    after_event=after_event,
    routes=add_routes,
)
