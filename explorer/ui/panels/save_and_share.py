"""The Save and share panel: the figures' download format, a saved session (a file to open again),
a link to this step, and the session exported as a web page or as JSON. Opening a saved file
restores a session as a link does (``explorer.ui.lifecycle.on_open_file``)."""

from __future__ import annotations

import gradio as gr

from explorer.analysis import export, snapshot
from explorer.analysis.export_html import export_html
from explorer.present import model_store
from explorer.ui import lifecycle, texts
from explorer.ui.feature import Feature
from explorer.ui.lifecycle import tab_file
from explorer.ui.page import Page
from explorer.ui.shown import Updates, current_snapshot
from explorer.ui.static_files import static
from explorer.ui.tab import require, tab_event
from explorer.ui.wiring import Wiring

LINK_SCRIPT = static("link.js")  # a link's query string made whole with the page's address


def layout(page: Page, place: str) -> None:
    with gr.Accordion("Save and share", open=False, elem_id="share"):
        gr.Markdown(texts.SAVE_AND_SHARE, elem_classes="explain")
        # The link first (the quickest way to share; below three file boxes a stranger looked for
        # it), and the files a button makes shown only once made (share.css).
        page.add(
            link_button=gr.Button("Make a link to this step", elem_id="make-link"),
            link_box=gr.Textbox(label="Link", interactive=False, buttons=["copy"], elem_id="share-link"),
            image_format=gr.Radio(["png", "svg"], value="png", label="Figures download as", elem_id="image-format"),
            save_button=gr.Button("Save session", elem_id="save-session"),
            saved_file=gr.File(label="Saved session", interactive=False, elem_id="saved-file"),
            open_file=gr.File(
                label="Open a saved session", file_types=[".npz"], type="filepath", elem_id="open-session"
            ),
            export_html_button=gr.Button("Export as a web page", elem_id="export-html"),
            export_json_button=gr.Button("Export as JSON", elem_id="export-json"),
            exported_file=gr.File(label="Exported session", interactive=False, elem_id="exported-file"),
        )


def wire(wiring: Wiring) -> None:
    page, on = wiring.page, wiring.on
    state = page.state
    page.save_button.click(on(on_save), [state], [page.saved_file])
    page.export_html_button.click(on(on_export_html), [state], [page.exported_file])
    page.export_json_button.click(on(on_export_json), [state], [page.exported_file])
    restored = {*wiring.restored, page.open_file}
    page.open_file.upload(on(lifecycle.on_open_file), [page.open_file, state], restored)
    page.link_button.click(on(on_make_link), [state], [page.link_box]).then(
        None, [page.link_box], [page.link_box], js=LINK_SCRIPT
    )


@tab_event
def on_save(request: gr.Request, st) -> Updates:
    st = require(st)
    data = snapshot.save_bytes(current_snapshot(st), st.session)
    return {"saved_file": tab_file(request, f"session-{len(st.session.token_ids)}-tokens.npz", data)}


@tab_event
def on_export_html(request: gr.Request, st) -> Updates:
    st = require(st)
    page = export_html(model_store.public_name(st.model_name), st.session)
    return {"exported_file": tab_file(request, f"session-{len(st.session.token_ids)}-tokens.html", page.encode())}


@tab_event
def on_export_json(request: gr.Request, st) -> Updates:
    st = require(st)
    data = export.to_json(model_store.public_name(st.model_name), st.session)
    return {"exported_file": tab_file(request, f"session-{len(st.session.token_ids)}-tokens.json", data.encode())}


@tab_event
def on_make_link(st) -> Updates:
    return {"link_box": snapshot.query_string(current_snapshot(require(st)))}


SAVE_AND_SHARE = Feature("save and share", layout=layout, wire=wire, places=("settings",), styles=("share.css",))
