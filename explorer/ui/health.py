"""Which server process a page is talking to: ``GET /health`` answers
``{"status": "ok", "server": "<name>"}`` once the app serves.

A load balancer or the replica supervisor (``explorer.serve``) asks it to know a replica is alive.
The page's script (static/page.js) asks it every 2 s: when another process answers (another replica
behind nginx, its own one lost; or the app started again), the page reloads, and the session the
browser kept (``gr.BrowserState``) is replayed on the process now serving it.

The name is new at every start (the replica's name and a random part; not the process id, which
is nobody's business outside the machine): a process started again on the same port is another
server, which holds none of the page's state.
"""

from __future__ import annotations

import os
import re
import secrets

from fastapi.responses import JSONResponse

from explorer.serve.replicas import REPLICA_ENV  # set by explorer.serve for each replica: r1, r2, ...
from explorer.ui.gradio_private import serve_ahead_of_gradio


def server_name() -> str:
    """This process's name for the pages: its replica name (if a safe one) and a random part."""
    replica = os.environ.get(REPLICA_ENV, "")
    replica = replica if re.fullmatch(r"[a-z0-9-]{1,32}", replica) else "app"
    return f"{replica}-{secrets.token_hex(6)}"


SERVER = server_name()


async def health_route() -> JSONResponse:
    return JSONResponse({"status": "ok", "server": SERVER}, headers={"Cache-Control": "no-store"})


def add_routes(app) -> None:
    """``GET /health``, ahead of Gradio's own routes (the app is Gradio's FastAPI app)."""
    serve_ahead_of_gradio(app, "/health", health_route, ["GET"])
