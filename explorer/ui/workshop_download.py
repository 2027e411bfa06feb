"""The class's answers as a CSV download, in one click of the teacher's "Download the answers".

The click's event asks the database for a ticket (``Workshops.download_ticket``: random, used once,
a minute at most) and the page's script opens ``workshop/answers.csv?code=K7PQ2M&ticket=…`` at once.
The CSV is made from the database when the link is opened, so it holds every answer given until
then; no file is written anywhere (a file in a temporary folder would outlive the workshop), and
once the workshop ends, its tickets are deleted with it. The teacher's secret is never in the link.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi.responses import PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool

from explorer.errors import as_sentence
from explorer.ui.gradio_private import serve_ahead_of_gradio
from explorer.workshop import WorkshopError, Workshops

PATH = "workshop/answers.csv"  # relative: the page may be served under a prefix


def link(code: str, ticket: str) -> str:
    return f"{PATH}?code={code}&ticket={ticket}"


def add_route(app, store: Callable[[], Workshops]) -> None:
    """``GET /workshop/answers.csv``, ahead of Gradio's own routes."""

    async def download_route(code: str = "", ticket: str = "") -> Response:
        headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
        try:
            data = await run_in_threadpool(store().download, code[:40], ticket[:100])
        except WorkshopError as error:
            return PlainTextResponse(as_sentence(error), status_code=404, headers=headers)
        name = f"workshop-{code.strip().upper()[:12]}-answers.csv"
        headers["Content-Disposition"] = f'attachment; filename="{name}"'
        return Response(data.encode("utf-8"), media_type="text/csv; charset=utf-8", headers=headers)

    serve_ahead_of_gradio(app, f"/{PATH}", download_route, ["GET"])
