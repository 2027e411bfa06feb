"""gr.Blocks with two changes: an output a callback leaves out costs nothing, and a refused
input is one line in the log.

A Step lists every tab's figures among its outputs and returns only the open tab's (a Gradio
event's outputs are fixed). Gradio answers each output left out with an empty update, and for
each builds a new component object and this user's copy of its config: ~30 a Step, about half of
Gradio's own work per step under load (bench/bench_load.py's profile). An empty update changes
nothing, so ``ExplorerBlocks`` hands it to the page as it is, which is what Gradio would have sent.

Gradio refuses a value its component does not accept (a layer past the slider's end, a head
not among the choices, a malformed value) and prints the refusal's whole traceback. A refusal is
not a bug: it reaches the caller as Gradio's message, and the log gets one line; a traceback in
the log means a bug (the tests fail on any).
"""

from __future__ import annotations

import logging

import gradio as gr
from gradio import components
from gradio.blocks import Block, convert_component_dict_to_list
from gradio.exceptions import ComponentProcessingError

log = logging.getLogger("decoder_explorer")

EMPTY_UPDATE = {"__type__": "update"}  # gr.skip(): "leave this output as it is"


class ExplorerBlocks(gr.Blocks):
    async def preprocess_data(self, block_fn, inputs, state, explicit_call=False):
        try:
            return await super().preprocess_data(block_fn, inputs, state, explicit_call)
        except (gr.Error, ComponentProcessingError) as error:
            message = error.message if isinstance(error, gr.Error) else str(error)
            log.info("refused an input of %s: %s", block_fn.name, message)
            raise gr.Error(message, print_exception=False) from error

    async def postprocess_data(self, block_fn, predictions, state):
        if isinstance(predictions, dict) and predictions and all(isinstance(k, Block) for k in predictions):
            predictions = convert_component_dict_to_list(list(block_fn.outputs), predictions)
        outputs = list(block_fn.outputs)
        if not isinstance(predictions, list) or len(outputs) <= 1 or len(predictions) != len(outputs):
            return await super().postprocess_data(block_fn, predictions, state)
        left_out = {
            i for i, value in enumerate(predictions)
            if isinstance(value, dict) and value == EMPTY_UPDATE and not outputs[i].stateful
        }  # fmt: skip
        if not left_out:
            return await super().postprocess_data(block_fn, predictions, state)
        # Gradio passes FINISHED_ITERATING through untouched (as None): the empty update goes back in after.
        marked = [components._Keywords.FINISHED_ITERATING if i in left_out else v for i, v in enumerate(predictions)]
        output = await super().postprocess_data(block_fn, marked, state)
        for i in left_out:
            output[i] = dict(EMPTY_UPDATE)
        return output
