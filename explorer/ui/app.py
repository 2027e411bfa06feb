"""The Gradio app: the page (explorer.ui.layout) wired to the callbacks (explorer.ui.events,
explorer.ui.lifecycle), and how it is served.

Callbacks return updates keyed by the page's component names; ``on`` turns those into the
component-keyed dicts Gradio wants, so that no callback needs the components themselves.
Per-user state lives in a ``gr.State`` holding an ``ExplorerState``; models are shared (see
model_store).
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import time
from collections.abc import Callable

import gradio as gr

from explorer import native_memory
from explorer.analysis import snapshot
from explorer.batching import MAX_BATCH
from explorer.loading.checkpoints import import_tokenizer_classes
from explorer.ui import absent_packages, api, events, lesson_events, lifecycle
from explorer.ui.blocks import ExplorerBlocks
from explorer.ui.layout import (
    CSS,
    DECODER_EXAMPLES,
    PAGE_SCRIPT,
    PRESENTER_SCRIPT,
    SETTINGS,
    SHOW_FEEDBACK,
    TABS,
    TRANSLATOR_EXAMPLES,
    Page,
    build_page,
    theme,
)
from explorer.ui.lesson_events import LESSON_VIEWS
from explorer.ui.render import FIGURES, MODEL_VIEWS, SESSION_VIEWS, STEP_VIEWS
from explorer.ui.tab import PROFILE_ENV, log, release_closed_tab

__all__ = ["DECODER_EXAMPLES", "TRANSLATOR_EXAMPLES", "build_demo", "launch", "start"]
SECRET_ENV = "DECODER_EXPLORER_BROWSER_SECRET"
CONCURRENCY_ENV = "DECODER_EXPLORER_CONCURRENCY"
STEP_CONCURRENCY_ENV = "DECODER_EXPLORER_STEP_CONCURRENCY"
QUEUE_SIZE = 256  # waiting events beyond this are refused with "queue full" rather than piling up


def browser_secret() -> str:
    """The key the kept session is encrypted with in the browser. It must outlive a restart
    (else a woken Space could not read what browsers kept). It is no secret: Gradio sends it to
    every browser in the page's config, so a kept session is untrusted input, checked like a link
    (``snapshot.checked_snapshot``). An operator may set their own."""
    return os.environ.get(SECRET_ENV) or "decoder-explorer: a session kept in your own browser"


def on(page: Page, callback: Callable) -> Callable:
    """``callback`` as Gradio calls it: its name-keyed updates become component-keyed.

    The wrapper keeps the callback's signature (Gradio reads it for gr.Request, gr.Progress
    and gr.SelectData) and, for a generator, is a generator itself (Gradio streams those).
    With ``$DECODER_EXPLORER_PROFILE`` set, it logs how long each callback took
    (bench/bench_ui.py reads these lines for its server/transport/browser breakdown)."""
    name = getattr(callback, "__name__", "callback")

    def by_component(updates, started: float):
        if os.environ.get(PROFILE_ENV):
            log.info("profile %s %.1f ms", name, (time.perf_counter() - started) * 1000)
        if not isinstance(updates, dict) or updates.get("__type__") == "update":  # gr.skip()
            return updates
        return {getattr(page, key): value for key, value in updates.items()}

    if inspect.isgeneratorfunction(callback):

        @functools.wraps(callback)
        def streamed(*args, **kwargs):
            updates = callback(*args, **kwargs)
            try:
                while True:
                    started = time.perf_counter()
                    try:
                        value = next(updates)
                    except StopIteration:
                        return
                    yield by_component(value, started)
            finally:  # Gradio closes this one when it cancels the run (Stop): the callback's cleanup runs now
                updates.close()

        return streamed

    @functools.wraps(callback)
    def called(*args, **kwargs):
        started = time.perf_counter()
        return by_component(callback(*args, **kwargs), started)

    return called


def build_demo() -> ExplorerBlocks:
    # Gradio keeps every file it serves (a step's all-heads image, a saved session) in its cache:
    # files older than an hour are deleted, checked every half hour, so the disk does not fill.
    absent_packages.remember_absent()
    with ExplorerBlocks(title="Decoder Explorer", delete_cache=(1800, 3600)) as demo:
        page = build_page(browser_secret())
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
    everything = {*p(*STEP_VIEWS), *p(*MODEL_VIEWS), *p(*SESSION_VIEWS)}
    restored = {*everything, *settings, page.tabs}
    figures = p(*FIGURES)

    lesson_shown = {*restored, *p(*LESSON_VIEWS)}
    demo.load(on(page, lesson_events.on_load), [page.model, *settings, page.kept], lesson_shown)
    demo.load(on(page, lesson_events.on_progress), [page.lessons_done], [page.lesson], queue=False)
    wire_lessons(page, lesson_shown)
    demo.unload(release_closed_tab)
    # A step changes the step views, and the session views when the text changed (a new session).
    stepped = {*p(*STEP_VIEWS), *p(*SESSION_VIEWS)}
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
    # A model switch ends a running Generate: not by Gradio's cancel, which could drop the
    # Generate's last word and leave a step of the old session, sent just before, on the page;
    # the Generate sees its session replaced at its next step and sends the new one's views.
    switched = {*everything, page.tabs, *p(*lifecycle.CLOSED_LESSON)}  # another model closes a lesson
    page.model.select(on(page, lifecycle.on_model_change), [page.model, page.state, *settings], switched)
    page.custom_model.submit(on(page, lifecycle.on_custom_model), [page.custom_model, page.state, *settings], switched)
    page.stop_button.click(on(page, events.on_stop), [page.state], p(*STEP_VIEWS), queue=False, cancels=[generate])
    page.undo_button.click(on(page, events.on_undo), [page.state], p(*STEP_VIEWS), trigger_mode="multiple", **quick)
    page.reset_button.click(on(page, events.on_reset), [page.state, *settings], everything)
    page.candidates.select(on(page, events.on_candidate), [page.state], p(*STEP_VIEWS), **quick)
    wire_view_choices(page, figures, quick)
    page.use_cache.input(
        on(page, events.on_cache_toggle), [page.state, page.use_cache], p("cache_info", "status", "kept")
    )
    sampling = p("temperature", "top_k", "top_p", "seed")
    for control in sampling:
        control.change(on(page, events.on_sampling), [page.state, *sampling], [page.kept])
    page.compare_button.click(on(page, events.on_compare), [page.state], p("timing_plot", "cache_info"))
    page.parallel_button.click(on(page, events.on_parallel_check), [page.state], [page.parallel_info])
    wire_switching_off(page, figures)
    pair = [page.state, *p("patch_clean", "patch_corrupted", "patch_answer", "patch_other")]
    patched = p("patching_info", "patching_plot", "patching_heads_plot", "patching_decoder_plot")
    page.patch_button.click(on(page, events.on_patching), pair, patched)
    explained = p("attribution_target", "attribution_info", "attribution_strip", "attribution_plot", "alignment_plot")
    page.attribute_button.click(
        on(page, events.on_attribute), [page.state, page.attribution_target, page.attribution_method], explained
    )
    run_b = p("compare_kind", "compare_text", "compare_temperature", "compare_seed")
    compared = p("compare_info", "compare_tokens", "compare_plot", "compare_attention_plot")
    page.compare_runs_button.click(on(page, events.on_compare_runs), [page.state, *run_b], compared)
    page.sandbox_button.click(on(page, events.on_sandbox), [page.state], p("sandbox_info", "sandbox_plot"))
    wire_save_and_share(page, restored)


def wire_view_choices(page: Page, figures: list, quick: dict) -> None:
    """The token, layer, head and tab a person looks at: each choice redraws the open tab's figures."""
    state = page.state
    # A token picked in the strip, or a row of a heatmap (its position is the event's index).
    for picker in (page.strip, page.self_plot, page.cross_plot):
        picker.select(on(page, events.on_token_click), [state], [page.strip, *figures], **quick)
    choice = [state, page.layer, page.head]
    # The slider's number box sends "input" as it is typed in (its "release" only comes on blur: a
    # typed layer stayed unshown); a drag sends "input" too, and always_last draws only the newest.
    page.layer.input(on(page, events.on_layer_or_head), choice, figures, trigger_mode="always_last", **quick)
    page.head.input(on(page, events.on_layer_or_head), choice, figures, **quick)
    page.heads.select(on(page, events.on_head_thumbnail), [state], page.pick("head", "self_plot", "kept"), **quick)
    for name, tab in TABS.items():
        getattr(page, tab).select(on(page, events.opener(name)), [state], figures, **quick)
    page.roles_image.select(on(page, events.on_role_click), [state], [page.layer, page.head, *figures], **quick)
    page.image_format.input(on(page, events.on_image_format), [state, page.image_format], figures, **quick)
    page.colour_scale.input(on(page, events.on_colour_scale), [state, page.colour_scale], figures, **quick)
    # Presenter mode is the page's alone: a class on the body (layout.CSS), and the heatmaps redraw.
    page.presenter.change(None, [page.presenter], None, js=PRESENTER_SCRIPT)


def wire_switching_off(page: Page, figures: list) -> None:
    """The Switch heads off tab, and Head roles' "test it"."""
    choice = [page.state, page.switched_off, page.ablation_method]
    shown = page.pick("switched_off", "ablation_info", "ablation_plot")
    page.add_head_button.click(on(page, events.on_add_head), choice, shown)
    page.add_attention_button.click(on(page, events.sublayer_adder("attention")), choice, shown)
    page.add_mlp_button.click(on(page, events.sublayer_adder("mlp")), choice, shown)
    for run in (page.run_ablation_button.click, page.switched_off.submit):
        run(on(page, events.on_run_ablation), choice, shown)
    page.clear_ablation_button.click(on(page, events.on_clear_ablation), [page.state, page.ablation_method], shown)
    tested = [page.tabs, page.switched_off, *figures]  # the result opens on the Switch heads off tab
    page.test_head_button.click(on(page, events.on_test_head), [page.state, page.ablation_method], tested)


def wire_lessons(page: Page, shown: set) -> None:
    """The Lessons panel: a lesson or the next step sets up everything on screen; Check answers."""
    done, p = page.lessons_done, page.pick
    page.lesson.input(on(page, lesson_events.on_lesson), [page.lesson, page.state, done], shown)
    page.lesson_next.click(on(page, lesson_events.on_lesson_next), [page.state, done], shown)
    page.lesson_back.click(on(page, lesson_events.on_lesson_back), [page.state], shown)
    checked = p("lesson_feedback", "lessons_done", "lesson")
    # The answer appears where the eye is: at 1280x720 the feedback sits below the fold.
    page.lesson_check.click(
        on(page, lesson_events.on_lesson_check), [page.state, page.lesson_answer, done], checked
    ).then(None, js=SHOW_FEEDBACK)


def wire_save_and_share(page: Page, restored: set) -> None:
    state = page.state
    page.save_button.click(on(page, lifecycle.on_save), [state], [page.saved_file])
    page.export_html_button.click(on(page, lifecycle.on_export_html), [state], [page.exported_file])
    page.export_json_button.click(on(page, lifecycle.on_export_json), [state], [page.exported_file])
    page.open_file.upload(on(page, lifecycle.on_open_file), [page.open_file, state], {*restored, page.open_file})
    page.link_button.click(on(page, lifecycle.on_make_link), [state], [page.link_box]).then(
        None, [page.link_box], [page.link_box], js="(q) => q ? location.origin + location.pathname + q : q"
    )


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


def start(**kwargs) -> gr.Blocks:
    """Build the app and start serving it in the background; ``kwargs`` go to Gradio's launch."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not every request Gradio makes to itself
    demo = build_demo()
    import_tokenizer_classes()  # before the first visitors load models at once (checkpoints.TOKENIZER_LOCK)
    native_memory.serve_memory_back()
    demo.queue(default_concurrency_limit=concurrency(), max_size=QUEUE_SIZE)
    # An upload larger than a saved session can be is refused by Gradio before it is read.
    # No run history: Gradio would keep every event's outputs (each step's figures) in the
    # browser's localStorage, reading and rewriting the whole list on every Step (~100 ms a step
    # at 650 tokens, bench_ui); the session the browser keeps for a reload is gr.BrowserState's.
    demo.launch(
        css=CSS, js=PAGE_SCRIPT, theme=theme(), max_file_size=snapshot.MAX_FILE_BYTES,
        run_history=False, prevent_thread_lock=True, **kwargs,
    )  # fmt: skip
    return demo


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
