"""``GET /source/explorer/model/<file>.py``: the model's own source, as installed, read-only, as text.

The Architecture tab names ``explorer/model/attention.py`` (the attention formula, one line per
step) as a link to it. Only the files of ``explorer/model`` are served, by a name from the list
made at start (nothing a request sends becomes a path), and only as plain text.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.responses import PlainTextResponse

import explorer.model
from explorer.ui.gradio_private import serve_ahead_of_gradio

MODEL_DIR = Path(explorer.model.__file__).resolve().parent
ROUTE = "/source/explorer/model/{name}"
SERVED = {path.name: path for path in sorted(MODEL_DIR.glob("*.py"))}  # the only files there are


def link(name: str) -> str:
    """The page's link to a file of explorer/model (relative: it works under a proxy's prefix too)."""
    return f"source/explorer/model/{name}"


async def source_route(name: str) -> PlainTextResponse:
    path = SERVED.get(name)
    if path is None:
        known = ", ".join(SERVED)
        return PlainTextResponse(f"No such file: the model's source files are {known}.", status_code=404)
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}
    return PlainTextResponse(path.read_text(encoding="utf-8"), headers=headers)


def add_routes(app) -> None:
    """The route, ahead of Gradio's own ones (the app is Gradio's FastAPI app)."""
    serve_ahead_of_gradio(app, ROUTE, source_route, ["GET"])
