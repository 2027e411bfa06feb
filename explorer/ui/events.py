"""What each click, choice and key does, once a session is on screen: stepping, and choosing
what to see (token, layer, head, tab, colours).

Every callback takes the tab's ``ExplorerState`` (and the values it reads from the page) and
returns updates keyed by the page's component names (see ``explorer.ui.render``), or ``gr.skip()``
to change nothing. ``explorer.ui.app`` wires them to the components. Each view tab's own events
are in its module (``explorer/ui/tabs/``); starting, restoring and switching sessions is in
``explorer.ui.lifecycle``.
"""

from __future__ import annotations

import contextlib
import os
import time

import gradio as gr

from explorer.batching import StepBatcher
from explorer.errors import InputError
from explorer.present import views
from explorer.present.session_keeper import KEEPER
from explorer.present.views import ExplorerState
from explorer.ui.render import render, tab_views
from explorer.ui.shown import Updates, kept_value
from explorer.ui.tab import (
    NO_MODEL,
    PROFILE_ENV,
    USER_ERRORS,
    TextRefused,
    current,
    log,
    new_session,
    require,
    tab_event,
)  # fmt: skip
from explorer.viz.colours import SCALES

# Generate streams faster than a browser draws: a step takes ~0.1 s here, redrawing the figures
# ~0.25 s. Were every step's figures sent, the page would fall ever further behind (30 s after
# 250 steps) and a click on Stop would wait behind that backlog. So the token strip and status
# follow every step, and the figures and candidates at most this often, and after the last step.
FIGURES_EVERY_S = 0.5
# Every user's Step (and each step of a Generate) waits here and runs in a batch with the others
# waiting at the same moment: one pass over the weights for all of them (explorer/batching.py).
STEPS = StepBatcher()


# ---------------------------------------------------------------- stepping
@tab_event
def on_step(st, *settings) -> Updates:
    st, fresh = current(st, *settings)
    started = time.perf_counter()
    STEPS.step(st.session)
    stepped = time.perf_counter()
    st.query, st.stopped_at = None, None
    shown = render(st, full=fresh)
    if os.environ.get(PROFILE_ENV):  # bench/bench_load.py: the model (with the wait for its batch) against the views
        model_ms, views_ms = (stepped - started) * 1000, (time.perf_counter() - stepped) * 1000
        log.info("profile step-parts batch %.1f ms views %.1f ms", model_ms, views_ms)
    return shown


def on_generate(st, limit, *settings):
    """Step up to ``limit`` times (``generated``); the session is never idle meanwhile, not even
    between two steps, when its tab's lock is free (explorer.present.session_keeper)."""
    with KEEPER.using(st):
        yield from generated(st, limit, *settings)


def generated(st, limit, *settings):
    """Step up to ``limit`` times, sending every step's text views and the figures now and then.

    Takes the tab's lock step by step (not for the whole run), so that Stop, a token click or
    a layer change run between two steps. A model switch, Reset or an opened file replaces the
    session: the run then ends by sending the new session's views itself. (A step it sent just
    before may reach the page after the switch's own views; its own last word, sent after that
    step in the same stream, is the new session, so the page never ends on the old one.)"""
    figures_sent_at = float("-inf")
    figures_behind = False  # the screen's figures show an earlier step than the session
    running = None  # the session this run steps
    steps = 0
    try:
        with st.lock if st is not None else contextlib.nullcontext():
            KEEPER.ready(st)
            st, fresh = current(st, *settings)
        st.stop_requested, st.generating, st.stopped_at = False, True, None
        running = st.session
        for i in range(int(limit)):
            with st.lock:  # one step at a time, between other events of this tab
                if st.session is not running or running.finished or st.stop_requested:
                    break
                STEPS.step(st.session)  # in a batch with other users' steps: a Generate starves no one
                steps += 1
                st.query = None
                due = time.perf_counter() - figures_sent_at >= FIGURES_EVERY_S or st.session.finished
                views_now = render(st, full=fresh and i == 0, with_figures=due)
            if due:
                figures_sent_at = time.perf_counter()
            figures_behind = not due
            yield views_now
    except USER_ERRORS as error:  # e.g. an empty prompt, or a context window filled during the run
        gr.Warning(str(error))
        if isinstance(error, TextRefused):
            yield {"prompt_note": error.note()}  # under the box until its text changes
        elif not figures_behind:
            yield gr.skip()  # a generator must yield something; the page stays as it was
    finally:  # also when Gradio cancels the run (Stop)
        if st is not None:
            st.generating = False
        # The run's last word in the log: the browser tests wait for it (not for a fixed time)
        # before they check that nothing steps on.
        log.info("Generate ended after %d steps", steps)
    if running is None or st.session is None:
        return
    with st.lock:  # the last step's figures, or the new session's views if it was replaced (even after the last step)
        replaced = st.session is not running
        views_now = render(st, full=replaced) if figures_behind or replaced else None
    if views_now is not None:
        yield views_now


def on_stop(st):
    """End a running Generate after its current step, and draw that step in full.

    Outside the queue, so that it is not queued behind the Generate it ends. Gradio's cancel
    (wired in app) may end the Generate before it sends its last step's figures (it sends them
    at most every FIGURES_EVERY_S), so Stop sends them itself. The flag is on the tab's one
    state object, which the running Generate holds too (a tab with no state yet has no
    Generate to stop)."""
    if st is None:
        return gr.skip()
    st.stop_requested = True
    with st.lock:  # after the step that is running
        if st.session is None:
            return gr.skip()
        if st.generating:  # the status line says that Stop ended it, and where
            st.stopped_at = len(st.session.token_ids)
        return render(st)


@tab_event
def on_undo(st) -> Updates:
    st = require(st)
    st.session.undo()
    st.query, st.stopped_at = None, None
    return render(st)


@tab_event
def on_reset(st, *settings) -> Updates:
    if st is None:
        raise InputError(NO_MODEL)
    st = new_session(st, *settings)
    return render(st, full=True)


@tab_event
def on_candidate(st, event: gr.SelectData):
    """A click on a candidate: that token is appended (or replaces the one just chosen from
    the same distribution)."""
    st = require(st)
    top, _, replaces_last = views.candidates(st.session)
    row = event.index[0] if isinstance(event.index, list | tuple) else event.index
    if row >= len(top):
        return gr.skip()
    if replaces_last:
        st.session.replace_last(top[row].token_id)
    else:
        st.session.force(top[row].token_id)
    st.query, st.stopped_at = None, None
    return render(st)


# ---------------------------------------------------------------- choosing what to see
@tab_event
def on_token_click(st, event: gr.SelectData) -> Updates:
    st = require(st)
    st.query = views.checked_query(st.session, event.index)
    return {"strip": views.token_strip(st), **tab_views(st)}


@tab_event
def on_layer_or_head(st, layer_value, head_value) -> Updates:
    st = require(st)
    st.layer, st.head = views.checked_view(st.session, layer_value, head_value)
    return tab_views(st)


@tab_event
def on_image_format(st, value):
    return figure_setting(st, "image_format", value, ("png", "svg"))


@tab_event
def on_colour_scale(st, value):
    return figure_setting(st, "colour_scale", value, SCALES)


def figure_setting(st: ExplorerState | None, name: str, value, allowed) -> Updates:
    """A setting of how figures are drawn changed: the open tab's figures again."""
    if st is None or st.session is None or value not in allowed:
        return gr.skip()
    setattr(st, name, value)
    return tab_views(st)


def opener(name: str):
    """The callback that opens tab ``name``: its figures are built now."""

    @tab_event
    def on_tab(st: ExplorerState | None):
        if st is None or st.session is None:
            return gr.skip()  # the page is still loading its first model
        st.tab = name
        return tab_views(st)

    return on_tab


# ---------------------------------------------------------------- settings of the live session
@tab_event
def on_cache_toggle(st, value):
    if st is None or st.session is None:
        return gr.skip()  # the next session reads the checkbox
    st.session.set_use_cache(bool(value))
    return {"cache_info": views.cache_summary(st), "status": views.status_line(st), "kept": kept_value(st)}


@tab_event
def on_sampling(st, temp, k, p, seed_value):
    if st is None or st.session is None:
        return gr.skip()  # the next session reads these settings
    st.session.set_sampling(temp, k, p, int(seed_value or 0))
    return {"kept": kept_value(st)}
