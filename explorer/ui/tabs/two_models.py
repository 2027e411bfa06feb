"""Two models: the page's text read by the page's model and a second one, side by side (each
model's strongest heads, its cache and speed, where their predictions agree along the text);
a click on a head opens its self-attention, on the model it belongs to."""

from __future__ import annotations

import gradio as gr

from explorer.analysis.two_models import compare_models
from explorer.errors import InputError
from explorer.present import model_store
from explorer.present import two_models as shown
from explorer.present.tabs import DEFAULT_TAB
from explorer.present.views import ExplorerState, checked_view
from explorer.ui import render as rendering  # not its names: the page reads a tab module's model_views
from explorer.ui.heavy import heavy_event
from explorer.ui.lifecycle import CLOSED_LESSON, closed_lesson
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot
from explorer.ui.tab import new_session, require, tab_event
from explorer.ui.tabs.parts import beside_explanation
from explorer.ui.wiring import Wiring

TWO_MODELS = """**The same text, two models.** Choose a second model and press *Read with both*: the
page's text (the one its tokens start from, as last stepped) is read by the page's model and by the
second one. Per head, the share of attention on the **previous token**, on the **first token** (a
"sink"), and the **induction** score (on a random sequence of the model's own vocabulary,
repeated); each model's strongest heads are listed, and a click opens one: its self-attention, on
the page's model, or, for the second model, the page switches to it with the same text (the tokens
generated are left behind; the page's model becomes the second). The **KV cache** per token comes
from the shapes (layers × key/value heads × head size × 2 × 4 bytes); a sliding layer keeps only
its window. Along the text: the two models cut it into different tokens, so they are compared where
both have read exactly the same characters, by the probability each gives the characters that
really come next, and whether their most probable next tokens begin alike."""

FIGURES = ("two_models_info", "two_models_heads_a", "two_models_heads_b", "two_models_plot")
STEPPED = False  # the census reads the text, not the tokens a step adds
NOTHING_YET = "Choose a second model and press **Read with both**."
# Every row in sight: 3 kinds x 5 heads at ~37 px each under a header (~600 px). A box of 420 px hid
# the induction rows in an inner scroll area a learner did not notice, on a laptop and on a phone.
TABLE_MAX_PX = 1200
# After a click on a head: the self-attention it opened scrolled into sight (the window stayed where the
# tables were, with the heatmap above the fold: the click looked like it did nothing). Centred when it
# fits, its top at the window's top when taller; nothing happens when the tab did not change (hidden).
SHOW_OPENED_HEAD = """() => requestAnimationFrame(() => {
    const heatmap = document.getElementById('self-attention');
    if (!heatmap || !heatmap.offsetParent) return;
    const fits = heatmap.getBoundingClientRect().height < window.innerHeight;
    heatmap.scrollIntoView({block: fits ? 'center' : 'start', behavior: 'instant'}); })"""

# Read with both: its progress bar (on the info box, under the buttons) brought into sight at the
# click. Below a 720-pixel screen's edge a stranger saw nothing move for 12 s while Gemma loaded.
SHOW_READING = """(...inputs) => { const info = document.getElementById('two-models-info');
    if (info && info.offsetParent) info.scrollIntoView({block: 'center', behavior: 'instant'});
    return inputs; }"""


def layout(page: Page) -> None:
    with beside_explanation(TWO_MODELS):
        page.add(
            two_models_second=gr.Dropdown(
                choices=model_store.dropdown_choices(), value=None, label="Second model", elem_id="two-models-second"
            )
        )  # fmt: skip
        with gr.Row():
            page.add(
                two_models_button=gr.Button("Read with both", elem_id="two-models-read"),  # primary once chosen
                two_models_unload=gr.Button("Unload the second model", elem_id="two-models-unload"),
            )
    page.add(two_models_info=gr.Markdown(NOTHING_YET, elem_id="two-models-info"))
    with gr.Row(equal_height=False):
        for side in ("a", "b"):
            with gr.Column(min_width=300):
                page.add(
                    **{f"two_models_heads_{side}": gr.Dataframe(
                        headers=shown.TABLE_HEADERS, interactive=False, elem_id=f"two-models-heads-{side}",
                        label="Strongest heads", max_height=TABLE_MAX_PX,
                        column_widths=["38%", "12%", "28%", "22%"],  # the score in sight, on a phone too
                    )}
                )  # fmt: skip
    page.add(two_models_plot=gr.Plot(label="Along the text", elem_id="two-models-chart"))


def figures(st: ExplorerState, box_text: str | None = None) -> Updates:
    """The census on screen; ``box_text``, the prompt box's text when the learner pressed Read with both
    (what to do is said when it is not the text read)."""
    result = st.two_models
    if result is None:
        return {"two_models_info": NOTHING_YET, "two_models_heads_a": None, "two_models_heads_b": None,
                "two_models_plot": None}  # fmt: skip
    generated = len(st.session.generated_ids)
    tables = {
        f"two_models_heads_{side}": gr.Dataframe(
            value=shown.head_rows(census), label=shown.table_label(census, st.model_name, generated)
        )
        for side, census in (("a", result.a), ("b", result.b))
    }
    info = shown.text_read(result, st.session.text, box_text) + "\n\n" + shown.summary(result)
    return {"two_models_info": info, **tables,
            "two_models_plot": shown_plot(st, shown.agreement_figure(result), "two-models")}  # fmt: skip


def wire(wiring: Wiring) -> None:
    page = wiring.page
    ours = page.pick(*FIGURES)
    read_with = [page.state, page.two_models_second, page.text]
    # Its progress (the second model loading, then both reading) on the tab's sentence only: by
    # default each of its four outputs drew its own "Loading … 0.0%" bar and timer.
    page.two_models_button.click(
        wiring.on(on_read_both), read_with, ours, show_progress_on=[page.two_models_info], js=SHOW_READING
    )
    page.two_models_second.change(
        wiring.on(read_button), [page.two_models_second], [page.two_models_button], queue=False, show_progress="hidden"
    )
    page.two_models_unload.click(wiring.on(on_unload), [page.state, page.two_models_second], [page.two_models_info])
    switched = {*wiring.new_model, *page.pick(*CLOSED_LESSON, "model", "two_models_second", *FIGURES)}
    for side in ("a", "b"):
        table = getattr(page, f"two_models_heads_{side}")
        opened = table.select(wiring.on(head_opener(side)), [page.state, *wiring.settings], switched)
        opened.then(None, js=SHOW_OPENED_HEAD)


def read_button(second_name) -> Updates:
    """Read with both is the tab's next step, drawn primary, only once a second model is chosen:
    primary with none chosen, it invited a press that could only be refused."""
    return {"two_models_button": gr.Button(variant="primary" if second_name else "secondary")}


@tab_event
@heavy_event("A two-models read")
def on_read_both(st, second_name, box_text=None, progress=gr.Progress()) -> Updates:
    """Both models read the page's text (its tokens' start), not the box's: the heads a click opens are
    those of the text on the page. A box that holds another text is said on the tab, and kept."""
    st = require(st)
    if not second_name:
        raise InputError("Choose the second model first (the list above the button).")
    if second_name == st.session.loaded.name:
        raise InputError(f"The page already shows {second_name}: choose another model to read the text beside it.")
    progress(0, desc=f"Loading {second_name}")
    second = model_store.get_model(second_name)
    progress(0.3, desc="Reading the text with both models")
    st.two_models = compare_models(st.session.loaded, second, st.session.text)
    return figures(st, box_text)


@tab_event
def on_unload(st, second_name) -> Updates:
    """Free the second model if no session uses it; one that other sessions use stays (an unload in
    one tab took it from every other tab, and their next read loaded a second copy)."""
    st = require(st)
    if not second_name:
        raise InputError("Choose the model to unload in the list first.")
    if second_name == st.model_name:
        raise InputError(f"{second_name} is the page's own model; it stays loaded while the page shows it.")
    unloaded = model_store.unload_model(second_name)
    if not unloaded.was_loaded:
        raise InputError(f"{second_name} is not loaded.")
    said = unloaded_said(second_name, unloaded)
    gr.Info(said)
    return {"two_models_info": said}


def unloaded_said(name: str, unloaded: model_store.Unloaded) -> str:
    """What an unload did, as it happened: freed, or kept for the sessions that use it."""
    if unloaded.users:
        sessions = "session uses" if unloaded.users == 1 else "sessions use"
        return (f"{name} stays loaded: {unloaded.users} other {sessions} it on this server (other visitors' "
                "tabs count too), so nothing was freed. The server frees it by itself once no session uses "
                "it and it needs the memory.")  # fmt: skip
    if unloaded.freed:
        return (f"{name} is unloaded and its memory freed; reading with it again loads it again from the "
                "disk (10 s or more for a larger model).")  # fmt: skip
    return f"{name} is unloaded: its memory goes back once the work still reading it ends."


def head_opener(side: str):
    """The table of model ``side``: a click opens the head on its own model."""

    @tab_event
    def on_open_head(st, text, chat, cache, temperature, top_k, top_p, seed, event: gr.SelectData) -> Updates:
        settings = [text, chat, cache, temperature, top_k, top_p, seed]  # render.SETTINGS, in order
        st = require(st)
        result = st.two_models
        census = None if result is None else (result.a if side == "a" else result.b)
        row = event.index[0] if isinstance(event.index, list | tuple) else event.index
        picked = None if census is None else shown.head_at(census, row)
        if picked is None:
            return gr.skip()
        if census.name != st.model_name:
            return switch_to(st, census.name, result.text, settings, picked)
        st.layer, st.head = checked_view(st.session, picked[0], str(picked[1]))
        st.tab = DEFAULT_TAB
        return {"tabs": gr.Tabs(selected=st.tab), "layer": gr.Slider(value=st.layer),
                "head": gr.Dropdown(value=st.head), **rendering.tab_views(st)}  # fmt: skip

    on_open_head.__name__ = on_open_head.__qualname__ = f"on_open_head_{side}"
    return on_open_head


def switch_to(st: ExplorerState, name: str, text: str, settings: list, head: tuple[int, int]) -> Updates:
    """The page on model ``name`` with the census's text, on ``head``'s self-attention; the page's
    model becomes the second. A box holding another text (typed, not stepped) keeps it."""
    previous, generated = st.model_name, len(st.session.generated_ids)
    box_kept = settings[0] != text
    loaded = model_store.get_model(name)
    new_session(st, text, *settings[1:], model_name=name)
    st.layer, st.head = checked_view(st.session, head[0], str(head[1]))
    st.tab = DEFAULT_TAB
    said = f"The page now shows {name} with the same text; {previous} is the second model."
    if generated:  # said on the table before the click too (shown.table_label)
        lost = shown.left_behind(generated, f"with {previous}")
        said += f" {lost[0].upper()}{lost[1:]}: Step or Generate goes on."
    if box_kept:
        said += " The box keeps the text you typed (not read yet: Step starts from it)."
    gr.Info(said, duration=None if generated else 10)  # a loss stays said until closed
    box = (
        gr.Textbox(label=rendering.text_label(loaded))
        if box_kept
        else gr.Textbox(value=text, label=rendering.text_label(loaded))
    )
    return {
        **rendering.model_views(loaded), **rendering.render(st, full=True), **closed_lesson(st),
        "model": gr.Dropdown(value=name), "text": box,
        "two_models_second": gr.Dropdown(value=previous), "tabs": gr.Tabs(selected=st.tab),
    }  # fmt: skip
