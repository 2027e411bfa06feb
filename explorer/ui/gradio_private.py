"""Every part of Gradio the page uses that Gradio does not document as public, in one module.

Gradio is pinned (requirements.txt, constraints.txt). An upgrade may rename or drop any of these
without notice: ``tests/test_gradio_private.py`` checks each one listed in ``PARTS`` and fails
naming the part and what here uses it. Each part is looked up where it is used, so that one gone
fails its own use (and its test), not the import of the page.

``ExplorerBlocks`` is gr.Blocks with two changes: an output a callback leaves out costs nothing,
and a refused input is one short line in the log.

A Step lists every tab's figures among its outputs and returns only the open tab's (a Gradio
event's outputs are fixed). Gradio answers each output left out with an empty update, and for
each builds a new component object and this user's copy of its config: ~30 a Step, about half of
Gradio's own work per step under load (bench/bench_load.py's profile). An empty update changes
nothing, so ``ExplorerBlocks`` hands it to the page as it is, which is what Gradio would have sent.

Gradio refuses a value its component does not accept (a layer past the slider's end, a head
not among the choices, a malformed value) and prints the refusal's whole traceback. A refusal is
not a bug: it reaches the caller as Gradio's message, and the log gets one line; a traceback in
the log means a bug (the tests fail on any). Gradio's message quotes the value refused, whole: a
5 MB dropdown value made 5 MB of log and went back to its sender; the message is cut
(``REFUSAL_CHARS``). A raw call with too few input values is refused the same way (Gradio raised
a ValueError and printed its traceback, ~40 lines quoting every value received).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gradio as gr

if TYPE_CHECKING:
    from gradio.components.plot import PlotData

log = logging.getLogger("decoder_explorer")

EMPTY_UPDATE = {"__type__": "update"}  # gr.skip(): "leave this output as it is"
REFUSAL_CHARS = 300  # a refusal's message at most, in the log and to its sender
WORD_CHARS = 40  # a longer word in it (a value quoted whole) is cut to this


@dataclass(frozen=True)
class Part:
    """A private part: ``name`` (dotted) in ``module``; ``parameters`` those of a method overridden."""

    module: str
    name: str
    used_by: str
    parameters: tuple[str, ...] = ()


# Attributes of a queued Blocks' ``_queue`` that ``set_on_queue`` sets (explorer.ui.app.calmer_queue).
QUEUE_SETTINGS = ("sleep_when_free", "ANAYLTICS_CACHE_FREQUENCY")  # (Gradio's spelling)

PARTS = (
    Part("gradio.blocks", "Blocks.preprocess_data", "ExplorerBlocks.preprocess_data (a refusal is one log line)",
         ("self", "block_fn", "inputs", "state", "explicit_call")),
    Part("gradio.blocks", "Blocks.validate_inputs", "ExplorerBlocks.validate_inputs (too few inputs: a refusal)",
         ("self", "block_fn", "inputs")),
    Part("gradio.blocks", "Blocks.postprocess_data", "ExplorerBlocks.postprocess_data (left-out outputs are free)",
         ("self", "block_fn", "predictions", "state")),
    Part("gradio.blocks", "convert_component_dict_to_list", "ExplorerBlocks.postprocess_data"),
    Part("gradio.components", "_Keywords.FINISHED_ITERATING", "ExplorerBlocks.postprocess_data"),
    Part("gradio.exceptions", "ComponentProcessingError", "ExplorerBlocks.preprocess_data"),
    Part("gradio.blocks", "Blocks._queue", "set_on_queue (explorer.ui.app.calmer_queue)"),
    Part("gradio.routes", "App.create_app", "serve_ahead_of_gradio (demo.app is Gradio's FastAPI App)"),
    Part("gradio.components.plot", "PlotData", "plot_data (explorer.ui.shown.shown_plot)"),
    Part("gradio.utils", "get_upload_folder", "upload_folder (explorer.ui.images.png_file)"),
    Part("gradio.state_holder", "StateHolder.session_data", "close_gradio_state (a tab released after its idle time)"),
    Part("gradio.state_holder", "SessionState.is_closed", "close_gradio_state"),
    Part("gradio.context", "LocalContext.blocks", "this_event_gone (explorer.ui.heavy: a job whose client left)"),
    Part("gradio.context", "LocalContext.event_id", "this_event_gone (explorer.ui.heavy)"),
    Part("gradio.context", "LocalContext.request", "this_request (explorer.ui.heavy: whose heavy job)"),
)  # fmt: skip


class ExplorerBlocks(gr.Blocks):
    async def preprocess_data(self, block_fn, inputs, state, explicit_call=False):
        from gradio.exceptions import ComponentProcessingError

        try:
            return await super().preprocess_data(block_fn, inputs, state, explicit_call)
        except (gr.Error, ComponentProcessingError) as error:
            message = cut(error.message if isinstance(error, gr.Error) else str(error))
            log.info("refused an input of %s: %s", block_fn.name, message)
            raise gr.Error(message, print_exception=False) from None  # its cause quotes the value whole

    def validate_inputs(self, block_fn, inputs):
        """Too few input values (a raw call; the page always sends them all) is a refusal."""
        if len(inputs) < len(block_fn.inputs):
            raise gr.Error(f"This event takes {len(block_fn.inputs)} input values; {len(inputs)} came.")
        super().validate_inputs(block_fn, inputs)

    async def postprocess_data(self, block_fn, predictions, state):
        from gradio import components
        from gradio.blocks import Block, convert_component_dict_to_list

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


def cut(message: str) -> str:
    """``message`` on one line, each word longer than ``WORD_CHARS`` cut (a value refused, quoted
    whole by Gradio), and the whole at most ``REFUSAL_CHARS`` long."""
    words = [w if len(w) <= WORD_CHARS else f"{w[:WORD_CHARS]}…({len(w):,} characters)" for w in str(message).split()]
    message = " ".join(words)
    return message if len(message) <= REFUSAL_CHARS else message[: REFUSAL_CHARS - 1] + "…"


def set_on_queue(demo: gr.Blocks, name: str, value) -> None:
    """Set one of ``QUEUE_SETTINGS`` on the queue of ``demo`` (queued): Gradio has no setting for
    them. A release without it keeps its own value and says so in the log."""
    queue = demo._queue
    if not hasattr(queue, name):
        log.warning("Gradio's queue has no %s: its own stays", name)
        return
    setattr(queue, name, value)


def serve_ahead_of_gradio(app, path: str, endpoint, methods: list[str]) -> None:
    """Add a route to Gradio's FastAPI app (``demo.app``, once launched) ahead of Gradio's own
    routes, which would otherwise answer first (its catch-all paths)."""
    app.add_api_route(path, endpoint, methods=methods)
    app.router.routes.insert(0, app.router.routes.pop())


def plot_data(plot_json: str) -> PlotData:
    """gr.Plot's payload for a Plotly figure already in JSON (Gradio would validate a go.Figure)."""
    from gradio.components.plot import PlotData

    return PlotData(type="plotly", plot=plot_json)


def upload_folder() -> str:
    """The folder Gradio serves this app's files from (images drawn for the page go there)."""
    from gradio.utils import get_upload_folder

    return get_upload_folder()


def close_gradio_state(demo: gr.Blocks, session_hash: str) -> None:
    """Gradio's own copy of a tab's state, treated as a closed tab's: Gradio drops it within the hour
    it keeps a closed tab's state for (its ``delete_all_expired_state``, once a second), as after the
    browser's unload. Only a flag is set here: Gradio's own sweep, on its event loop, removes it."""
    holder = getattr(demo, "state_holder", None)
    session = holder.session_data.get(session_hash) if holder is not None else None
    if session is not None:
        session.is_closed = True


def this_request() -> gr.Request | None:
    """The request of the event this thread runs (Gradio keeps it for ``gr.Info``), or None."""
    from gradio.context import LocalContext

    return LocalContext.request.get(None)


def this_event_gone() -> bool:
    """Whether the client of the event this thread runs has gone: Gradio's queue marks an event
    not ``alive`` when its client's stream closes (a closed tab, a dropped connection). Outside an
    event, or with a Gradio that keeps no such mark, never."""
    from gradio.context import LocalContext

    blocks, event_id = LocalContext.blocks.get(None), LocalContext.event_id.get(None)
    queue = getattr(blocks, "_queue", None)
    event = getattr(queue, "event_ids_to_events", {}).get(event_id) if event_id is not None else None
    return event is not None and not getattr(event, "alive", True)
