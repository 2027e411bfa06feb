"""A tab's place among the server's sessions (``ExplorerState.life``), kept by
``explorer.present.session_keeper``."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.analysis.snapshot import Snapshot


@dataclass
class Life:
    """A tab's place among the server's sessions: who holds it, when it was last used, and what
    the keeper did with it. A notebook's state has one too, never tracked."""

    key: str = ""  # the tab's Gradio session hash ('' until a server tracks it)
    address: str = ""  # the client's address (explorer.ui.workshop_gate.address_of)
    last_used: float = 0.0  # the keeper's clock when an event of the tab last ended
    events: int = 0  # events of the tab running now
    put_aside: Snapshot | None = None  # the tokens of a session whose tensors were let go
    ended: bool = False  # released after its idle time
    notice: str | None = None  # what the status line says once (the session was read again)
