"""The Gradio app: the page (explorer.ui.layout) wired to the callbacks (explorer.ui.events,
explorer.ui.lifecycle, each view tab's own in explorer/ui/tabs/), and how it is served.

Callbacks return updates keyed by the page's component names; ``on`` (explorer.ui.wiring) turns
those into the component-keyed dicts Gradio wants, so that no callback needs the components
themselves. Per-user state lives in a ``gr.State`` holding an ``ExplorerState``; models are shared
(see model_store).
"""

from __future__ import annotations

import functools
import logging
import os
import sys

import gradio as gr

from explorer import native_memory
from explorer.analysis import snapshot
from explorer.batching import MAX_BATCH
from explorer.loading.checkpoints import import_tokenizer_classes
from explorer.present import session_keeper
from explorer.present.tabs import TABS
from explorer.serve.replicas import SECRET_ENV, TRUSTED_PROXY_ENV
from explorer.ui import absent_packages, api, events, health, lifecycle
from explorer.ui.features import FEATURES, after_event_hooks
from explorer.ui.gradio_private import ExplorerBlocks, close_gradio_state, set_on_queue
from explorer.ui.layout import (
    CSS,
    PAGE_SCRIPT,
    PRESENTER_SCRIPT,
    TAB_SESSION_HEAD,
    build_page,
    theme,
)
from explorer.ui.page import Page
from explorer.ui.render import SESSION_VIEWS, SETTINGS, figure_names, model_view_names, step_views
from explorer.ui.tab import release_closed_tab, release_ended_tab
from explorer.ui.texts import DECODER_EXAMPLES, TRANSLATOR_EXAMPLES
from explorer.ui.wiring import Wiring, on

__all__ = ["DECODER_EXAMPLES", "TRANSLATOR_EXAMPLES", "build_demo", "launch", "start"]
CONCURRENCY_ENV = "DECODER_EXPLORER_CONCURRENCY"
STEP_CONCURRENCY_ENV = "DECODER_EXPLORER_STEP_CONCURRENCY"
QUEUE_IDLE_ENV = "DECODER_EXPLORER_QUEUE_IDLE_S"
QUEUE_IDLE_S = 0.005
QUEUE_SIZE = 256  # waiting events beyond this are refused with "queue full" rather than piling up


def browser_secret() -> str:
    """The key the kept session is encrypted with in the browser. It must outlive a restart
    (else a woken Space could not read what browsers kept). It is no secret: Gradio sends it to
    every browser in the page's config, so a kept session is untrusted input, checked like a link
    (``snapshot.checked_snapshot``). An operator may set their own."""
    return os.environ.get(SECRET_ENV) or "decoder-explorer: a session kept in your own browser"


def build_demo() -> ExplorerBlocks:
    # Gradio keeps every file it serves (a step's all-heads image, a saved session) in its cache:
    # files older than an hour are deleted, checked every half hour, so the disk does not fill.
    absent_packages.remember_absent()
    with ExplorerBlocks(title="Decoder Explorer", delete_cache=(1800, 3600)) as demo:
        page = build_page(browser_secret())
        page.after_event = after_event_hooks()
        wire(demo, page)
        api.hide_page_events(demo)
        api.register()
    return demo


def wire(demo: gr.Blocks, page: Page) -> None:
    """Every event of the page: which callback, what it reads, what it may change."""
    p = page.pick
    settings = p(*SETTINGS)
    # A step's progress shows on the status line only: a spinner over every figure would flash
    # on each ~100 ms step (and redraw each component twice).
    quick = {"show_progress": "minimal", "show_progress_on": [page.status]}
    step_outputs = p(*step_views())
    everything = {*step_outputs, *p(*model_view_names()), *p(*SESSION_VIEWS)}
    restored = {*everything, *settings, page.tabs}
    figures = p(*figure_names())

    # The page's first load: a feature's own opening (its link), else a link's session, the one
    # this browser kept, or the default model (explorer.ui.lifecycle).
    openers = tuple(feature.opens for feature in FEATURES if feature.opens is not None)
    opened = {*restored, *p(*(name for feature in FEATURES for name in feature.opens_views))}
    load = on(page, lifecycle.page_load(openers))
    # Its progress on the status line only (which says the model is loading): by default each of
    # the ~seven outputs drew its own "Loading … 0.0%" bar and timer.
    loaded = demo.load(load, [page.model, *settings, page.kept], opened, **quick)
    demo.unload(release_closed_tab)
    # A step changes the step views, and the session views when the text changed (a new session).
    stepped = {*step_outputs, *p(*SESSION_VIEWS)}
    # Every click counts: quick clicks queue in order (Gradio's default drops those made while one runs).
    # Steps and Generates share a larger pool than the other events: they mostly wait for the
    # step batcher (events.STEPS), which runs everyone's waiting steps as one batched pass.
    steps = {"concurrency_limit": step_concurrency(), "concurrency_id": "steps"}
    page.step_button.click(
        on(page, events.on_step), [page.state, *settings], stepped, trigger_mode="multiple", **quick, **steps
    )
    generate = page.generate_button.click(
        on(page, events.on_generate), [page.state, page.max_new, *settings], stepped, **quick, **steps
    )
    switched = {*everything, page.tabs}  # what another model changes (and its features', their own)
    page.stop_button.click(on(page, events.on_stop), [page.state], step_outputs, queue=False, cancels=[generate])
    page.undo_button.click(on(page, events.on_undo), [page.state], step_outputs, trigger_mode="multiple", **quick)
    page.reset_button.click(on(page, events.on_reset), [page.state, *settings], everything)
    # A refusal of the box's text is no longer true once the text changes: cleared in the page.
    page.text.input(None, None, [page.prompt_note], js="() => ''", queue=False)
    page.candidates.select(on(page, events.on_candidate), [page.state], step_outputs, **quick)
    page.use_cache.input(
        on(page, events.on_cache_toggle), [page.state, page.use_cache], p("cache_info", "status", "kept")
    )
    sampling = p("temperature", "top_k", "top_p", "seed")
    for control in sampling:
        control.change(on(page, events.on_sampling), [page.state, *sampling], [page.kept])
    wiring = Wiring(page, figures, quick, restored, settings, switched, demo=demo, loaded=loaded)
    for feature in FEATURES:  # each feature's own events
        if feature.wire is not None:
            feature.wire(wiring)
    wire_view_choices(wiring)


def wire_view_choices(wiring: Wiring) -> None:
    """The token, layer, head and tab a person looks at: each choice redraws the open tab's figures."""
    page, figures, quick = wiring.page, wiring.figures, wiring.quick
    state = page.state
    wiring.picks_query(page.strip)  # a token picked in the strip (the heatmaps' rows: their tabs)
    choice = [state, page.layer, page.head]
    # The slider's number box sends "input" as it is typed in (its "release" only comes on blur: a
    # typed layer stayed unshown); a drag sends "input" too, and always_last draws only the newest.
    page.layer.input(on(page, events.on_layer_or_head), choice, figures, trigger_mode="always_last", **quick)
    page.head.input(on(page, events.on_layer_or_head), choice, figures, **quick)
    for tab in TABS:
        getattr(page, tab.component).select(on(page, events.opener(tab.id)), [state], figures, **quick)
    page.image_format.input(on(page, events.on_image_format), [state, page.image_format], figures, **quick)
    page.colour_scale.input(on(page, events.on_colour_scale), [state, page.colour_scale], figures, **quick)
    # Presenter mode is the page's alone: a class on the body (static/page.css), and the heatmaps redraw.
    page.presenter.change(None, [page.presenter], None, js=PRESENTER_SCRIPT)


def step_concurrency() -> int:
    """How many Step and Generate events run at once: as many as a batch holds by default (they
    wait in the batcher, whose one worker runs the model); ``$DECODER_EXPLORER_STEP_CONCURRENCY`` overrides."""
    return max(1, int(os.environ.get(STEP_CONCURRENCY_ENV) or MAX_BATCH))


def concurrency() -> int:
    """How many events run at once: one per core by default.

    A step is a burst of matrix products that already uses every core (torch's threads), so
    running more steps at once than there are cores only makes each slower; the rest wait in
    Gradio's queue, in order, and every user's own events run one after another.
    """
    return max(1, int(os.environ.get(CONCURRENCY_ENV) or os.cpu_count() or 1))


def calmer_queue(demo: gr.Blocks) -> None:
    """Take from Gradio's queue two chores that hold the GIL, which the thread that runs the model
    takes back after most of its ~2,400 PyTorch calls a pass (a busy Python thread beside it makes
    a pass many times slower: bench/bench_gil.py). Gradio has no setting for either: its queue's
    attributes are set (explorer.ui.gradio_private), and tests/test_gradio_private.py fails if a
    Gradio release renames them."""
    set_on_queue(demo, "sleep_when_free", queue_idle_s())
    # After every event Gradio summed up its last 10,000 events with pandas (2-14 ms, more as it
    # recorded more: bench/bench_gil.py) for its monitoring page only, which the app turns off (start).
    set_on_queue(demo, "ANAYLTICS_CACHE_FREQUENCY", sys.maxsize)  # (Gradio's spelling)


def queue_idle_s() -> float:
    """How long Gradio's queue loop sleeps when it has nothing it can start: it looks again every
    1 ms (on Linux) when it is empty, and when every waiting event waits for its turn (a class's
    Steps waiting for the batcher): ~8% of a core with no visitor at all. Every 5 ms instead
    (``$DECODER_EXPLORER_QUEUE_IDLE_S``, within 0.5-100 ms): an event starts at most 4 ms later."""
    try:
        idle_s = float(os.environ.get(QUEUE_IDLE_ENV) or QUEUE_IDLE_S)
    except ValueError:
        idle_s = QUEUE_IDLE_S
    return max(0.0005, min(idle_s, 0.1))


def believe_forwarded_for(environ=os.environ) -> str:
    """Whom the server believes a client's X-Forwarded-For from (uvicorn's FORWARDED_ALLOW_IPS, set
    here before it starts): the balancer's addresses in ``$DECODER_EXPLORER_TRUSTED_PROXY`` (comma
    separated; the replica supervisor sets its nginx's), else an operator's own FORWARDED_ALLOW_IPS,
    else nobody. Never any loopback client by default (uvicorn's own default): a request sent
    straight to the app would choose the address that limits per address count."""
    trusted = environ.get(TRUSTED_PROXY_ENV, "").strip() or environ.get("FORWARDED_ALLOW_IPS", "").strip()
    environ["FORWARDED_ALLOW_IPS"] = trusted
    return trusted


def start(**kwargs) -> gr.Blocks:
    """Build the app and start serving it in the background; ``kwargs`` go to Gradio's launch."""
    believe_forwarded_for()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not every request Gradio makes to itself
    demo = build_demo()
    import_tokenizer_classes()  # before the first visitors load models at once (checkpoints.TOKENIZER_LOCK)
    native_memory.serve_memory_back()
    keep_sessions(demo)
    demo.queue(default_concurrency_limit=concurrency(), max_size=QUEUE_SIZE)
    calmer_queue(demo)
    # An upload larger than a saved session can be is refused by Gradio before it is read.
    # No run history: Gradio would keep every event's outputs (each step's figures) in the
    # browser's localStorage, reading and rewriting the whole list on every Step (~100 ms a step
    # at 650 tokens, bench_ui); the session the browser keeps for a reload is gr.BrowserState's.
    # No monitoring page: by default Gradio shows any visitor each event's timings and counts
    # (GET /monitoring/summary), and summing them up cost every event (calmer_queue).
    demo.launch(
        css=CSS, js=PAGE_SCRIPT, head=TAB_SESSION_HEAD, theme=theme(), max_file_size=snapshot.MAX_FILE_BYTES,
        run_history=False, prevent_thread_lock=True, enable_monitoring=False, **kwargs,
    )  # fmt: skip
    for feature in FEATURES:  # each feature's own routes (a panel's own requests, a tab's links)
        if feature.routes is not None:
            feature.routes(demo.app)
    health.add_routes(demo.app)  # GET /health: a replica is alive; a page learns its server changed
    return demo


def keep_sessions(demo: gr.Blocks) -> None:
    """Every session on its idle time, the memory budget and its address's cap, as the options say
    (explorer.present.session_keeper); a tab released after its idle time leaves Gradio's copy too."""
    keeper = session_keeper.KEEPER
    keeper.configure()
    keeper.on_end = [release_ended_tab, functools.partial(close_gradio_state, demo)]
    session_keeper.sweep_sessions()


def launch(**kwargs) -> None:
    """Serve the app until the process is stopped (the command's way)."""
    demo = start(**kwargs)
    if kwargs.get("share") and not demo.share_url:
        print(NO_SHARE_LINK.format(url=demo.local_url), flush=True)
    demo.block_thread()


# Gradio prints its own reason above this (it could not reach its share server, or fetch the
# tunnel program it needs); the app itself serves on.
NO_SHARE_LINK = (
    "No share link: the network refused it (see Gradio's message above). The explorer runs on at {url}; "
    "to share it, run it where the internet is reachable, or put it on a Hugging Face Space."
)
