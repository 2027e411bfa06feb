"""The model choice as a feature: the list of models (first in the top row) and, where the
operator allows it, a box for another model (a local folder or a Hub id, among the settings).
Choosing one starts a session on it (``explorer.ui.lifecycle``: loading, what a new model changes)."""

from __future__ import annotations

import gradio as gr

from explorer.present import model_store
from explorer.ui import lifecycle, model_card
from explorer.ui.feature import Feature
from explorer.ui.page import Page
from explorer.ui.wiring import Wiring


def layout(page: Page, place: str) -> None:
    if place == "top":
        page.add(
            model=gr.Dropdown(
                choices=model_store.dropdown_choices(), value=model_store.default_model_name(), label="Model",
                elem_id="model",
            )
        )  # fmt: skip
    else:  # "settings-end"
        page.add(
            custom_model=gr.Textbox(
                label="Another model (local folder or Hub id)", visible=model_store.custom_models_allowed(),
                elem_id="custom-model", placeholder="owner/name or a folder the operator allows",
            )
        )  # fmt: skip


def wire(wiring: Wiring) -> None:
    """A model switch ends a running Generate: not by Gradio's cancel, which could drop the
    Generate's last word and leave a step of the old session, sent just before, on the page; the
    Generate sees its session replaced at its next step and sends the new one's views."""
    page, on, settings = wiring.page, wiring.on, wiring.settings
    switched = {*wiring.new_model, *page.pick(*lifecycle.CLOSED_LESSON)}  # another model closes a lesson
    switched |= {*page.pick(*lifecycle.SESSION_SETTINGS)}  # a session coming back brings its settings
    page.model.select(on(lifecycle.on_model_change), [page.model, page.state, *settings], switched)
    page.custom_model.submit(on(lifecycle.on_custom_model), [page.custom_model, page.state, *settings], switched)


MODEL_CHOICE = Feature(
    "model choice",
    layout=layout,
    wire=wire,
    places=("top", "settings-end"),
    styles=("model_choice.css",),
    routes=model_card.add_routes,
)
