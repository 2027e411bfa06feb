"""One browser tab's state, and how every event of a tab runs: alone, with friendly errors.

A tab's ``ExplorerState`` lives in a ``gr.State``; it is also registered here by Gradio's
session hash so that closing the tab frees its session at once (Gradio itself keeps a closed
tab's state for an hour), and with the server's keeper (``session_keeper.KEEPER``), which releases
it after its idle time and puts it aside under the sessions' memory budget, whether or not a
browser ever said the tab closed.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path

import gradio as gr

from explorer.errors import InputError
from explorer.loading import ModelLoadError
from explorer.model import ContextWindowError
from explorer.present import model_store
from explorer.present.session_keeper import KEEPER
from explorer.present.views import ExplorerState
from explorer.session import GenerationSession
from explorer.ui.heavy import heavy_if, long_text
from explorer.ui.workshop_gate import address_of

NO_MODEL = "No model is loaded yet: choose one from the Model list."
# The project's own errors become warnings; anything else is a bug and fails loudly (log, tests).
USER_ERRORS = (InputError, ModelLoadError, ContextWindowError)


class TextRefused(InputError):
    """A new text in the box that cannot start a session (too long, no tokens) while the previous
    text's session stays on screen. Said under the box until the text changes (``prompt_note``),
    not only in a warning that fades: the box and the tokens below it now disagree."""

    def note(self) -> str:
        return (f"**The text in the box is not the one shown below.** {self} "
                "The tokens on screen are still those of the previous text.")  # fmt: skip


log = logging.getLogger("decoder_explorer")
PROFILE_ENV = "DECODER_EXPLORER_PROFILE"  # set: callbacks log how long they took (bench/bench_ui.py, bench_load.py)
# Weak: Gradio owns the states.
open_states: weakref.WeakValueDictionary[str, ExplorerState] = weakref.WeakValueDictionary()
# "Save session" writes here (Gradio serves a copy from its cache); a tab's file goes when it closes.
SAVED_SESSIONS = Path(tempfile.gettempdir()) / f"decoder-explorer-{os.getpid()}"


def tab_event(handler: Callable) -> Callable:
    """Run one event of a tab: alone (the tab's lock), and with a user's mistake shown as a
    warning that changes nothing on the page."""

    def alone(st: ExplorerState | None, args, kwargs):
        with st.lock if st is not None else contextlib.nullcontext(), KEEPER.using(st):
            try:
                KEEPER.ready(st)
                return said_if_brought_back(st, handler(*args, **kwargs))
            except TextRefused as error:
                gr.Warning(str(error))
                return {"prompt_note": error.note()}
            except USER_ERRORS as error:
                gr.Warning(str(error))
                return gr.skip()

    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        st = next((a for a in args if isinstance(a, ExplorerState)), None)
        updates = alone(st, args, kwargs)
        made = updates.get("state") if st is None and isinstance(updates, dict) else None
        if isinstance(made, ExplorerState):  # the tab's first event made its state: the limits after it too
            KEEPER.keep_limits(made)
        return updates

    return wrapper


def said_if_brought_back(st: ExplorerState | None, updates):
    """An event's updates; when its session was put aside and read again first, a toast says so
    where the event does not redraw the status line (which says it, ``views.status_line``)."""
    if st is not None and st.life.notice and not (isinstance(updates, dict) and "status" in updates):
        gr.Info(st.life.notice)
    return updates


def tab_state(request: gr.Request, st: ExplorerState | None, model_name: str) -> ExplorerState:
    """This tab's state object, made on its first event and remembered for its unload; counted
    among the server's sessions (its idle time, the memory budget, its address's cap)."""
    if st is None:
        st = ExplorerState(model_name)
        open_states[request.session_hash] = st
    KEEPER.track(st, request.session_hash, address_of(request))
    return st


def require(st: ExplorerState | None) -> ExplorerState:
    """The tab's state, which has a session; else the user is told to choose a model (or to
    reload, when the server released the session after its idle time)."""
    if st is None or st.session is None:
        raise InputError(KEEPER.ended_note() if st is not None and st.life.ended else NO_MODEL)
    return st


def new_session(st, text_value, chat_value, cache_value, temp, k, p, seed_value, model_name=None) -> ExplorerState:
    """Start a session in ``st`` (the tab's one state object); on an error ``st`` is unchanged."""
    model_name = model_name or st.model_name
    # A long text or a model's first load is heavy work: admitted in one place (explorer/ui/heavy.py).
    with heavy_if(long_text(text_value) or not model_store.is_loaded(model_name), "A long text's prefill"):
        loaded = model_store.get_model(model_name)
        # A cache policy chosen in the lab stays for a new text of the same model, the cache on.
        kept_policy = st.session is not None and model_name == st.model_name and cache_value
        session = GenerationSession(
            loaded, text_value, use_cache=cache_value, chat=chat_value and loaded.has_chat_template,
            temperature=float(temp), top_k=int(k), top_p=float(p), seed=int(seed_value or 0),
            cache_policy=st.session.cache_policy if kept_policy else None,
        )  # fmt: skip
    st.start(model_name, session)
    return st


def current(st, text_value, chat_value, *settings) -> tuple[ExplorerState, bool]:
    """The user's session, started anew when the text or the chat setting changed; and whether it is new."""
    if st is None:
        raise InputError(NO_MODEL)
    if st.life.ended:  # a step would start the text in the box anew, its tokens silently gone
        raise InputError(KEEPER.ended_note())
    session = st.session
    if (
        session is None
        or session.text != text_value
        or session.chat != bool(chat_value and session.loaded.has_chat_template)
    ):
        try:
            return new_session(st, text_value, chat_value, *settings), True
        except InputError as error:
            if session is None:
                raise
            raise TextRefused(str(error)) from None
    return st, False


def tab_tag(session_hash: str) -> str:
    """A name for a tab that is safe in paths and logs: the session hash comes from the browser
    (it could hold "../"), and a log should not carry what lets someone act as that tab."""
    return hashlib.sha256(session_hash.encode("utf-8", "replace")).hexdigest()[:32]


def saved_session_folder(request: gr.Request) -> Path:
    """This tab's folder for its saved session."""
    return SAVED_SESSIONS / tab_tag(request.session_hash)


def release_closed_tab(request: gr.Request) -> None:
    st = open_states.pop(request.session_hash, None)
    KEEPER.forget(request.session_hash)
    shutil.rmtree(saved_session_folder(request), ignore_errors=True)
    if st is not None:
        with st.lock:  # after the step that may be running
            if st.session is not None:
                st.release()
                log.info("released the session of a closed browser tab (tab %s)", tab_tag(request.session_hash)[:12])


def release_ended_tab(session_hash: str) -> None:
    """The keeper released this tab's session after its idle time: its saved file goes too."""
    open_states.pop(session_hash, None)
    shutil.rmtree(SAVED_SESSIONS / tab_tag(session_hash), ignore_errors=True)
