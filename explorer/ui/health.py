"""Which server process a page is talking to, and whether it is alive.

- ``GET /health``: ``{"status": "ok", "server": "<name>"}`` once the app serves. A load balancer
  or the replica supervisor (``explorer.serve``) asks it.
- ``GET /health/stream``: the same line at once, then a newline every 15 s for as long as this
  process lives. The page's script (static/page.js) holds one open: when it breaks, the process
  that served the page is gone (killed, restarted, or a replica behind nginx lost); the script asks
  again, and if another process answers (another name), it reloads the page, whose session the
  browser kept (``gr.BrowserState``): the tokens are replayed on the process now serving it.

The name is new at every start (the replica's name, the process id and a random part): a process
started again on the same port is another server, which holds none of the page's state.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets

from fastapi.responses import JSONResponse, StreamingResponse

from explorer.serve.replicas import REPLICA_ENV  # set by explorer.serve for each replica: r1, r2, ...

KEEP_ALIVE_S = 15  # under nginx's and browsers' idle timeouts (60 s and more)


def server_name() -> str:
    """This process's name for the pages: its replica name (if a safe one), pid, and a random part."""
    replica = os.environ.get(REPLICA_ENV, "")
    replica = replica if re.fullmatch(r"[a-z0-9-]{1,32}", replica) else "app"
    return f"{replica}-{os.getpid()}-{secrets.token_hex(4)}"


SERVER = server_name()


def said() -> str:
    return json.dumps({"status": "ok", "server": SERVER})


async def health_route() -> JSONResponse:
    return JSONResponse(json.loads(said()), headers={"Cache-Control": "no-store"})


async def stream_route() -> StreamingResponse:
    async def lines():
        yield said() + "\n"
        while True:  # ends when the page goes (the server cancels this) or the process does
            await asyncio.sleep(KEEP_ALIVE_S)
            yield "\n"

    # X-Accel-Buffering: nginx passes each line on as it comes, not when its buffer fills.
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(lines(), media_type="text/plain", headers=headers)


def add_routes(app) -> None:
    """Both routes, ahead of Gradio's own (the app is Gradio's FastAPI app)."""
    for path, route in (("/health", health_route), ("/health/stream", stream_route)):
        app.add_api_route(path, route, methods=["GET"])
        app.router.routes.insert(0, app.router.routes.pop())
