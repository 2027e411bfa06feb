"""What several tabs' layouts share: a figure with its explanation under it, or controls with
their explanation beside them."""

from __future__ import annotations

import contextlib

import gradio as gr


def figure_beside_text(plot: gr.Component, explanation: str) -> gr.Component:
    """A figure with its explanation under it (the views' column has room for the figure only)."""
    plot.render()
    gr.Markdown(explanation, elem_classes="explain")
    return plot


@contextlib.contextmanager
def beside_explanation(text: str):
    """A tab's controls (the ``with`` block) on the left, its explanation on the right."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            yield
        with gr.Column(scale=2, min_width=240):
            gr.Markdown(text, elem_classes="explain")
