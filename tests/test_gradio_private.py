"""Every private part of Gradio the page uses (explorer.ui.gradio_private) is still there.

Gradio is pinned; an upgrade that renames or drops a part fails here, by name, with what uses it,
instead of as a page that quietly does more work, logs tracebacks, or loses a route.
"""

from __future__ import annotations

import importlib
import inspect
import re

import gradio as gr
import pytest
from fastapi.testclient import TestClient
from starlette.responses import PlainTextResponse

from explorer.ui import gradio_private
from explorer.ui.gradio_private import PARTS, QUEUE_SETTINGS


def looked_up(module: str, dotted: str):
    found = importlib.import_module(module)
    for name in dotted.split("."):
        assert hasattr(found, name), (
            f"Gradio {gr.__version__} has no {module}.{dotted} (no {name!r}): explorer.ui.gradio_private uses it"
        )
        found = getattr(found, name)
    return found


@pytest.mark.parametrize("part", PARTS, ids=lambda part: f"{part.module}.{part.name}")
def test_each_private_part_is_still_there(part):
    if part.name == "Blocks._queue":  # set by queue(), on the instance
        demo = gr.Blocks().queue()
        assert hasattr(demo, "_queue"), f"Gradio {gr.__version__}'s Blocks has no _queue: {part.used_by} uses it"
        return
    if part.module == "gradio.state_holder":  # attributes set on each instance
        owner, attribute = part.name.split(".")
        made = inspect.getsource(looked_up(part.module, owner).__init__)
        assigned = re.search(rf"self\.{attribute}\b[^=\n]*=", made)  # "self.x: T = ..." or "self.x = ..."
        assert assigned, f"Gradio {gr.__version__}'s {part.name} is gone: {part.used_by} uses it"
        return
    found = looked_up(part.module, part.name)
    if part.parameters:
        named = tuple(inspect.signature(found).parameters)
        assert named == part.parameters, (
            f"Gradio {gr.__version__}'s {part.module}.{part.name} takes {named}, not {part.parameters}: "
            f"{part.used_by} overrides it"
        )


@pytest.mark.parametrize("name", QUEUE_SETTINGS)
def test_each_queue_setting_is_an_attribute_of_gradios_queue(name):
    demo = gr.Blocks().queue()
    assert hasattr(demo._queue, name), (
        f"Gradio {gr.__version__}'s queue has no {name}: explorer.ui.app.calmer_queue sets it (set_on_queue)"
    )


def test_a_route_served_ahead_of_gradio_is_answered_by_ours():
    """Gradio's own paths (here its /config) would answer first: ours goes ahead of them."""
    with gr.Blocks() as demo:
        gr.Textbox()
    app = looked_up("gradio.routes", "App.create_app")(demo)

    async def ours() -> PlainTextResponse:
        return PlainTextResponse("ours")

    gradio_private.serve_ahead_of_gradio(app, "/config", ours, ["GET"])
    assert app.router.routes[0].path == "/config"
    assert TestClient(app).get("/config").text == "ours", "Gradio's app answered before the route put ahead of it"


def test_the_payloads_built_from_private_parts_are_gradios_own():
    plot = gradio_private.plot_data('{"data": []}')
    assert plot.type == "plotly" and plot.plot == '{"data": []}'
    assert gradio_private.upload_folder()


def test_a_refusals_message_is_one_short_line_with_a_long_value_cut():
    """Issue 58: Gradio quotes a refused value whole (a 5 MB dropdown value went to the log and back)."""
    message = "Value: " + "Z" * 5_000_000 + " is not in the list of choices: ['a', 'b']"
    cut = gradio_private.cut(message)
    assert cut == "Value: " + "Z" * 40 + "…(5,000,000 characters) is not in the list of choices: ['a', 'b']"
    assert len(gradio_private.cut("Z " * 100_000)) == gradio_private.REFUSAL_CHARS
    assert gradio_private.cut("two\nlines") == "two lines"
