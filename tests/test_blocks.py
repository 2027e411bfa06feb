"""ExplorerBlocks: what a callback leaves out reaches the page as Gradio's empty update, without
Gradio building a component for it; what it returns is processed as Gradio does."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import gradio as gr
from gradio.state_holder import SessionState

from explorer.ui.gradio_private import EMPTY_UPDATE, ExplorerBlocks


def run(blocks_class, returned):
    """One event of three textboxes, a plot and a state, postprocessed as ``blocks_class`` does:
    (what the page receives, the user's session state, the components)."""
    with blocks_class() as demo:
        made = {"boxes": [gr.Textbox(label=f"box {i}") for i in range(3)], "plot": gr.Plot(), "state": gr.State()}
        gr.Button().click(lambda: None, None, [*made["boxes"], made["plot"], made["state"]])
    session = SessionState(demo)
    coroutine = demo.postprocess_data(demo.fns[0], returned(**made), session)
    with ThreadPoolExecutor(1) as thread:  # its own event loop: another test's may be running in this thread
        return thread.submit(asyncio.run, coroutine).result(), session, made


def test_left_out_outputs_are_empty_updates_built_for_free():
    def returned(boxes, plot, state):
        return {boxes[1]: "hello", state: 42}

    ours, session, made = run(ExplorerBlocks, returned)
    gradios, gradio_session, gradio_made = run(gr.Blocks, returned)
    assert ours == gradios  # what the page receives is the same
    assert ours == [EMPTY_UPDATE, "hello", EMPTY_UPDATE, EMPTY_UPDATE, None]
    boxes = made["boxes"]
    assert session[boxes[0]._id] is boxes[0] and session[boxes[2]._id] is boxes[2]  # no component made for them
    assert gradio_session[gradio_made["boxes"][0]._id] is not gradio_made["boxes"][0]  # Gradio makes a new one
    assert session[made["state"]._id] == 42 == gradio_session[gradio_made["state"]._id]


def test_updates_with_properties_are_gradios_own():
    def returned(boxes, plot, state):
        return {boxes[0]: gr.Textbox(visible=False), boxes[2]: gr.skip()}

    ours, _, _ = run(ExplorerBlocks, returned)
    gradios, _, _ = run(gr.Blocks, returned)
    assert ours == gradios and ours[0]["visible"] is False and ours[2] == EMPTY_UPDATE
