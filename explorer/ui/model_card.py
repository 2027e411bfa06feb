"""``GET /model-card/<name>``: a registered model's card, and ``/model-card/<name>/licence``:
the licence text its package ships (Gemma's terms), both offline, one click from the page.

The card is built here from the registry and, when the model is loaded, from its config; nothing
a request sends becomes a path (a name is looked up in the registry). The shipped licence is a
third party's HTML page: it is served with a policy that runs none of its scripts.
"""

from __future__ import annotations

import html
import re

from fastapi.responses import HTMLResponse, PlainTextResponse

from explorer.loading.errors import ModelUnavailableError
from explorer.loading.registry import REGISTRY
from explorer.present import model_store
from explorer.ui.gradio_private import serve_ahead_of_gradio

CARD_ROUTE = "/model-card/{name:path}"
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
}
STYLE = "body{font:16px/1.5 sans-serif;max-width:46em;margin:2em auto;padding:0 1em}td{padding:2px 12px 2px 0}"


def link(name: str) -> str:
    """The page's link to a model's card (relative: it works under a proxy's prefix too), or ""."""
    return f"model-card/{name}" if name in REGISTRY else ""


def architecture_rows(config) -> list[tuple[str, str]]:
    """What a learner compares between two models, from the loaded model's own config."""
    sliding = sum(config.window_of(i) is not None for i in range(config.n_layers))
    rows = [
        ("family", config.family),
        ("layers", str(config.n_layers)),
        ("query heads / key-value heads", f"{config.n_heads} / {config.n_kv_heads}"),
        ("head size", str(config.head_dim)),
        ("width (d_model) / feed-forward", f"{config.d_model} / {config.d_ff}"),
        ("vocabulary", f"{config.vocab_size:,}"),
        ("positions", config.positions),
    ]
    if sliding:
        rows.append(("sliding-window layers", f"{sliding} of {config.n_layers}, window {config.sliding_window}"))
    return rows


def card_html(name: str) -> str:
    spec = REGISTRY[name]
    loaded = model_store.already_loaded(name)
    parts = [f"<h1>{html.escape(name)}</h1>", f"<p>{html.escape(spec.description)}</p>", "<h2>Licence</h2>"]
    parts.append(f"<p>{html.escape(spec.licence)}</p>")
    if spec.licence_file is not None:
        parts.append(f'<p><a href="{html.escape(name)}/licence">The licence text (shipped with the weights)</a></p>')
    if loaded is not None:
        rows = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in architecture_rows(loaded.config)
        )
        parts.append(f"<h2>Architecture</h2><table>{rows}</table>")
    else:
        parts.append("<p>Load the model in the explorer to see its architecture here.</p>")
    title = f"<title>{html.escape(name)}: model card</title><style>{STYLE}</style>"
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'>{title}</head><body>{''.join(parts)}</body></html>"
    )


def licence_page(name: str, shipped: str) -> str:
    """The shipped licence's own text: a saved web page keeps its site's menus and styles around
    the terms (its ``<article>``); only that is shown, on a page of ours."""
    start, end = shipped.find("<article"), shipped.rfind("</article>")
    body = shipped[start : end + len("</article>")] if 0 <= start < end else shipped
    body = re.sub(r"<(style|button|script)\b.*?</\1>", "", body, flags=re.DOTALL | re.IGNORECASE)
    title = f"<title>{html.escape(name)}: licence</title><style>{STYLE}</style>"
    return f"<!doctype html><html lang='en'><head><meta charset='utf-8'>{title}</head><body>{body}</body></html>"


async def card_route(name: str):
    model = name.removesuffix("/licence")
    spec = REGISTRY.get(model)
    if spec is None:
        return PlainTextResponse(f"No card: the registered models are {', '.join(REGISTRY)}.", 404, headers=HEADERS)
    if model == name:
        return HTMLResponse(card_html(model), headers=HEADERS)
    try:
        text = spec.licence_file().read_text(encoding="utf-8") if spec.licence_file else None
    except (ModelUnavailableError, OSError):
        text = None
    if text is None:
        return PlainTextResponse(spec.licence, headers=HEADERS)
    return HTMLResponse(licence_page(model, text), headers=HEADERS)  # no script runs, whatever it holds


def add_routes(app) -> None:
    serve_ahead_of_gradio(app, CARD_ROUTE, card_route, ["GET"])
