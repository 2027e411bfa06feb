"""Where a tab's session comes from: the page's first load (a link, the session the browser
kept, or the default model), a model switch, an opened file; and saving and sharing it.

Callbacks return updates keyed by ``Page`` names, like those in ``explorer.ui.events``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gradio as gr

from explorer.admission import HEAVY_POSITIONS
from explorer.analysis import snapshot
from explorer.errors import as_sentence
from explorer.loading import ModelLoadError
from explorer.present import model_store
from explorer.present.tabs import opening_tab, shown_tab
from explorer.present.views import ExplorerState, checked_view
from explorer.ui import texts
from explorer.ui.heavy import heavy_if, long_text
from explorer.ui.render import buttons_on, chat_box, model_views, render, text_label
from explorer.ui.shown import Updates, current_snapshot
from explorer.ui.tab import USER_ERRORS, new_session, saved_session_folder, tab_event, tab_state
from explorer.ui.texts import DECODER_EXAMPLES, TRANSLATOR_EXAMPLES


def page_load(openers: tuple[Callable[..., Updates | None], ...]) -> Callable:
    """The page's first load: the first feature that opens the page its own way (a lesson's link:
    ``opener(request, inputs, progress)`` gives its updates, or None when the address is not its to
    open), else ``first_load``. The event keeps ``on_load``'s name and inputs (the API's ``/on_load``)."""

    def on_load(request: gr.Request, model_name, *inputs, progress=gr.Progress(track_tqdm=True)) -> Updates:
        for opens in openers:
            opened = opens(request, inputs, progress)
            if opened is not None:
                return opened
        return first_load(request, model_name, *inputs, progress=progress)

    return on_load


@tab_event
def first_load(request: gr.Request, model_name, *inputs, progress=gr.Progress(track_tqdm=True)) -> Updates:
    """A link's session, else the one this browser kept (a reload), else the default model."""
    *settings, kept_session = inputs  # the kept session comes last: API callers may leave it out
    dropped: Updates = {}  # a kept session that cannot be restored is forgotten, not retried at every visit
    try:
        linked = snapshot.from_query(request.query_params)
        if linked is not None:
            progress(0, desc=f"Opening the linked session on {linked.model}")
            return apply_snapshot(request, None, linked)[0]
    except USER_ERRORS as error:
        instead = "The session this browser kept" if kept_session is not None else "The default model"
        gr.Warning(f"This link cannot be opened: {as_sentence(error)} {instead} is shown instead.")
    if kept_session is not None:
        try:
            restored = snapshot.checked_snapshot(kept_session)
            progress(0, desc=f"Bringing back your session on {restored.model}")
            return apply_snapshot(request, None, restored)[0]
        except USER_ERRORS as error:
            gr.Warning(f"The session this browser kept cannot be restored: {as_sentence(error)} A new one is shown.")
            dropped = {"kept": None}
    progress(0, desc=f"Loading {model_name}")
    try:
        loaded = model_store.get_model(model_name)
    except ModelLoadError as error:
        return {**dropped, **open_another_model(request, model_name, error, settings)}
    st = new_session(tab_state(request, None, model_name), *settings)
    st.placed_text = settings[0]  # the example the page opened with
    return {**model_views(loaded), **render(st, full=True)}


def open_another_model(request: gr.Request, failed: str, error: ModelLoadError, settings: list) -> Updates:
    """The page's model cannot load (its package missing, the Hub out of reach): open the first
    model that can, and say so on the status line; if none can, the status line says that."""
    for entry in model_store.offered_models():
        if entry.name == failed or not entry.available:
            continue
        try:
            loaded = model_store.get_model(entry.name)
        except ModelLoadError:
            continue
        text_value = settings[0]
        if loaded.is_encoder_decoder:  # the page opened with a prompt for a decoder
            text_value = TRANSLATOR_EXAMPLES[0]
        st = new_session(tab_state(request, None, entry.name), text_value, *settings[1:])
        st.placed_text = text_value
        said = f"{failed} could not be loaded here: {as_sentence(error)} {entry.name} is open instead."
        gr.Warning(said)
        out = {**model_views(loaded), **render(st, full=True), "model": gr.Dropdown(value=entry.name)}
        out["text"] = gr.Textbox(value=text_value, label=text_label(loaded))
        return {**out, "status": f"{said}\n\n{out['status']}"}
    said = f"{failed} could not be loaded here: {as_sentence(error)} No other model can be loaded either."
    gr.Warning(said)
    return {**buttons_on(), "status": f"**{said}** The operator must install one (see the README)."}


@tab_event
def on_model_change(request: gr.Request, model_name, st, *settings, progress=gr.Progress(track_tqdm=True)):
    if st is not None and st.session is not None and st.model_name == model_name:
        return gr.skip()  # this model's session is already on screen (a repeated event)
    previous = st.model_name if st is not None else None
    try:
        progress(0, desc=f"Loading {model_name}")
        with heavy_if(not model_store.is_loaded(model_name), f"Loading {model_name}"):
            loaded = model_store.get_model(model_name)
    except ModelLoadError as error:
        gr.Warning(f"{as_sentence(error)} The previous model stays loaded.")
        return {"model": gr.Dropdown(value=previous)} if previous else gr.skip()
    st = tab_state(request, st, model_name)
    back = session_left(st, model_name, settings[0])
    if st.session is not None:
        keep_left(st)
    if back is not None:
        return {**coming_back(request, st, model_name, loaded, back), **closed_lesson(st)}
    text_value = text_for(loaded, st, settings[0])
    st = new_session(st, text_value, *settings[1:], model_name=model_name)
    st.tab = opening_tab(st.tab, loaded.is_encoder_decoder)
    return {
        **model_views(loaded), "text": gr.Textbox(value=text_value, label=text_label(loaded)),
        "tabs": gr.Tabs(selected=st.tab), **render(st, full=True), **closed_lesson(st),
    }  # fmt: skip


# What a session coming back sets on the page besides the model's views (``show_session``).
SESSION_SETTINGS = ("chat", "use_cache", "temperature", "top_k", "top_p", "seed")
LEFT_KEPT = 8  # sessions kept for the way back, one per model: the oldest goes (a few Hub ids or files could pile up)


def keep_left(st: ExplorerState) -> None:
    """Keep the session on screen (its tokens, settings and view, not its cache) for a switch back."""
    st.left.pop(st.model_name, None)
    st.left[st.model_name] = current_snapshot(st)
    while len(st.left) > LEFT_KEPT:
        st.left.pop(next(iter(st.left)))


def session_left(st: ExplorerState, model_name: str, text_value: str) -> snapshot.Snapshot | None:
    """The session this tab had with ``model_name`` when it switched away, to show again: only if
    it had tokens of its own (else a new session is the same) and the box still holds its text or
    the text of the session on screen (a text typed since is a new start, and wins)."""
    left = st.left.pop(model_name, None)
    if left is None or not left.generated:
        return None
    on_screen = st.session.text if st.session is not None else None
    return left if text_value in (left.text, on_screen) else None


def coming_back(request: gr.Request, st: ExplorerState, name: str, loaded, left: snapshot.Snapshot) -> Updates:
    """Back to a model this tab left: its session as it was (text, settings, tokens, view), said on
    the status line. (Switching away used to drop it: 33 generated tokens gone without a word.)"""
    out = show_session(request, st, name, snapshot.restore(loaded, left), left)
    n = len(left.generated)
    said = f"Your {name} session is back as you left it ({n} generated token{'' if n == 1 else 's'})."
    return {**out, "status": f"{said}\n\n{out['status']}"}


# What closing a lesson changes (a model switch, "Back to your text").
CLOSED_LESSON = (
    "lesson", "lesson_text", "lesson_answer", "lesson_feedback", "lesson_back", "answer_cover", "lesson_check",
    "lesson_next",
)  # fmt: skip


def closed_lesson(st: ExplorerState) -> Updates:
    """The Lessons panel as before any lesson: nothing chosen, no question, nothing to go back to.
    (A lesson's question is about the model it set up: another model closes it.)"""
    st.lesson = None
    return {
        "lesson": gr.Dropdown(value=None), "lesson_text": texts.LESSONS, "lesson_feedback": "",
        "lesson_answer": gr.Radio(choices=[], value=None, visible=False), "lesson_back": gr.Button(visible=False),
        "lesson_check": gr.Button(visible=False), "lesson_next": gr.Button(visible=False),  # nothing to check
        "answer_cover": "",  # nothing a lesson's question asks for is covered any more
    }  # fmt: skip


def text_for(loaded, st: ExplorerState, text_value: str) -> str:
    """The text for a newly chosen model: the user's own text stays; an example, or the text
    the explorer put in the box, becomes the first example of the new model's kind."""
    own = text_value not in (*DECODER_EXAMPLES, *TRANSLATOR_EXAMPLES, st.placed_text)
    if own or st.session is None or st.session.is_encoder_decoder == loaded.is_encoder_decoder:
        return text_value
    st.placed_text = TRANSLATOR_EXAMPLES[0] if loaded.is_encoder_decoder else DECODER_EXAMPLES[0]
    return st.placed_text


@tab_event
def on_custom_model(request: gr.Request, name, st, *settings):
    resolved = model_store.resolve_custom(name)
    return on_model_change.__wrapped__(request, resolved, st, *settings)


def apply_snapshot(request: gr.Request, st, snap: snapshot.Snapshot, arrays=None) -> tuple[Updates, float]:
    """Rebuild a session from a saved file, a link or the browser's copy, and everything on screen with it.

    Everything is checked before the tab's state changes. With a file's ``arrays``, returns the
    largest difference of the recomputed attention from the saved one."""
    name = model_store.resolve_custom(snap.model)
    long = long_text(snap.text) or len(snap.generated) > HEAVY_POSITIONS or not model_store.is_loaded(name)
    with heavy_if(long, f"Restoring a session of {len(snap.generated):,} generated tokens"):
        loaded = model_store.get_model(name)
        session = snapshot.restore(loaded, snap)
    difference = snapshot.attention_difference(session, arrays) if arrays is not None else 0.0
    return show_session(request, st, name, session, snap), difference


def show_session(request: gr.Request, st, name: str, session, snap: snapshot.Snapshot) -> Updates:
    """Put ``session`` on screen in this tab with the view ``snap`` describes, and the page's
    settings as the session has them (checked first: on an error nothing changes)."""
    loaded = session.loaded
    layer_index, head_choice = checked_view(session, snap.layer, snap.head)
    st = tab_state(request, st, name)
    take_view(st, name, session, snap, layer_index, head_choice)
    out = {  # the box shows the session's choice, and only where the model has a chat template
        **model_views(loaded), "text": gr.Textbox(value=snap.text, label=text_label(loaded)),
        "chat": chat_box(loaded, snap.chat),
        "use_cache": snap.use_cache, "temperature": snap.temperature, "top_k": snap.top_k, "top_p": snap.top_p,
        "seed": snap.seed, "tabs": gr.Tabs(selected=st.tab), **render(st, full=True),
    }  # fmt: skip
    if name in model_store.REGISTRY:
        out["model"] = gr.Dropdown(value=name)
    return out


def show_tokens(st: ExplorerState, session, snap: snapshot.Snapshot) -> Updates:
    """Put ``session`` (the tab's model, text and settings, other tokens) on screen with ``snap``'s
    view, on a page that already shows that model and those settings: the step views, and the
    layer, head and tab as values. A follower's page takes the teacher's every step this way: the
    updates of the model's views and settings (``show_session``) would change nothing there, and
    building them cost more of the server's Python than the views themselves."""
    layer_index, head_choice = checked_view(session, snap.layer, snap.head)
    tab = st.tab
    take_view(st, st.model_name, session, snap, layer_index, head_choice)
    out = {"layer": st.layer, "head": st.head, "prompt_note": "", **render(st)}
    return out if st.tab == tab else {**out, "tabs": gr.Tabs(selected=st.tab)}


def take_view(st: ExplorerState, name: str, session, snap: snapshot.Snapshot, layer: int, head: str) -> None:
    """The tab's state shows ``session`` with ``snap``'s view (its layer and head checked already)."""
    st.start(name, session)
    st.layer, st.head = layer, head
    st.query = snap.query if snap.query is not None and 0 <= snap.query < len(session.token_ids) else None
    st.tab = shown_tab(snap.tab, session.is_encoder_decoder)


@tab_event
def on_open_file(request: gr.Request, path, st, progress=gr.Progress(track_tqdm=True)):
    """Restore a saved session; the upload box is emptied either way, ready for another file."""
    if not path:
        return gr.skip()  # the file was removed from the box
    try:
        with open(path, "rb") as f:  # Gradio's own copy of the upload
            snap, arrays = snapshot.read_bytes(f.read())
        progress(0, desc=f"Replaying {len(snap.generated)} tokens on {snap.model}")
        out, difference = apply_snapshot(request, st, snap, arrays)
    except USER_ERRORS as error:
        gr.Warning(f"This file cannot be opened: {as_sentence(error)} The session on screen stays.")
        return {"open_file": None}
    gr.Info(
        f"Restored the text and {len(snap.generated)} generated tokens on {snap.model}. The attention was "
        f"recomputed; it differs from the file's by at most {difference:.1e}."
    )
    return {**out, "open_file": None}


def tab_file(request: gr.Request, name: str, data: bytes) -> str:
    """Write a file for this tab to download: one of each kind per tab, replaced by the next."""
    folder = saved_session_folder(request)
    folder.mkdir(parents=True, exist_ok=True)
    for earlier in folder.glob(f"*{Path(name).suffix}"):
        earlier.unlink(missing_ok=True)
    path = folder / name
    path.write_bytes(data)
    return str(path)
