"""The UI layer's plumbing: names that callbacks use exist on the page, and errors are sorted."""

from __future__ import annotations

import dataclasses

import gradio as gr
import pytest

from explorer.errors import InputError
from explorer.ui import app, render
from explorer.ui.layout import SESSION_BUTTONS, SETTINGS, TABS, Page, build_page
from explorer.ui.tab import tab_event
from explorer.ui.views import ExplorerState


@pytest.fixture(scope="module")
def page() -> Page:
    with gr.Blocks():
        return build_page("a test secret")


def test_every_name_a_callback_may_update_is_a_component_of_the_page(page):
    names = {f.name for f in dataclasses.fields(Page)}
    used = {*render.FIGURES, *render.STEP_VIEWS, *render.SESSION_VIEWS, *render.MODEL_VIEWS, *SETTINGS}
    assert used | set(SESSION_BUTTONS) | set(TABS.values()) <= names
    assert set(render.FIGURES_OF_TAB) == set(TABS)
    for name in names:
        assert isinstance(getattr(page, name), gr.components.Component | gr.blocks.BlockContext), name


def test_on_turns_named_updates_into_component_updates(page):
    def callback(st, value):
        return {"status": f"got {value}", "kept": None}

    assert app.on(page, callback)(None, 3) == {page.status: "got 3", page.kept: None}
    assert app.on(page, lambda: gr.skip())() == gr.skip()

    def streaming(n):
        for i in range(n):
            yield {"status": str(i)}

    assert [*app.on(page, streaming)(2)] == [{page.status: "0"}, {page.status: "1"}]


def test_the_projects_errors_become_warnings_and_a_bug_fails(monkeypatch):
    warned = []
    monkeypatch.setattr(gr, "Warning", warned.append)

    @tab_event
    def refuses(st):
        raise InputError("Shorten the text.")

    @tab_event
    def has_a_bug(st):
        raise ValueError("a bug")

    assert refuses(ExplorerState("m")) == gr.skip() and warned == ["Shorten the text."]
    with pytest.raises(ValueError, match="a bug"):
        has_a_bug(ExplorerState("m"))


# The choices a person makes, and the event each is wired to (besides every button's click and
# every tab's select, which are checked for all of them).
CHOICES = {
    "layer": "input", "head": "input", "heads": "select", "strip": "select", "self_plot": "select",
    "cross_plot": "select", "candidates": "select", "roles_image": "select", "model": "select",
    "custom_model": "submit", "use_cache": "input", "temperature": "change", "top_k": "change", "top_p": "change",
    "seed": "change", "lesson": "input", "open_file": "upload", "image_format": "input", "colour_scale": "input",
    "presenter": "change", "switched_off": "submit",
}  # fmt: skip


def test_the_demo_builds_with_every_event_wired():
    """Every button has its click, every tab its select, every choice its event: named, so that a
    wire left out fails here (the demo itself builds too)."""
    from explorer.ui.blocks import ExplorerBlocks

    app.build_demo()
    with ExplorerBlocks() as demo:
        page = build_page("a test secret")
        app.wire(demo, page)
    wired = {(block_id, name) for dep in demo.fns.values() for block_id, name in dep.targets}
    buttons = [f.name for f in dataclasses.fields(Page) if isinstance(getattr(page, f.name), gr.Button)]
    expected = {(name, "click") for name in buttons} | {(tab, "select") for tab in TABS.values()}
    expected |= set(CHOICES.items())
    missing = sorted((name, event) for name, event in expected if (getattr(page, name)._id, event) not in wired)
    assert not missing, missing
    assert len(buttons) >= 20 and "lesson_back" in buttons


def test_a_generate_whose_session_is_replaced_ends_on_the_new_session(checkpoints):
    """A model switch (or Reset, or an opened file) replaces the session while Generate runs:
    its next step sees that and its last message is the new session's views, so a step of the
    old session it sent just before cannot be the last thing the page shows."""
    import explorer
    from explorer.session import GenerationSession
    from explorer.ui import events

    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    st = ExplorerState(str(checkpoints["gpt2"]))
    st.start(st.model_name, GenerationSession(loaded, "The quick brown fox"))
    prompt_length = st.session.prompt_length
    settings = ("The quick brown fox", False, True, 0.0, 0, 1.0, 0)
    run = events.on_generate(st, 50, *settings)
    first = next(run)
    assert len(first["strip"]) == prompt_length + 1  # the old session, one token generated
    new = GenerationSession(loaded, "Hello")
    st.start(st.model_name, new)  # what a model switch does, under the lock
    last = [*run]
    assert len(last) == 1 and [kind for _, kind in last[0]["strip"]] == ["prompt"] * (len(new.token_ids) - 1) + [
        "query"
    ]
    assert "layer" in last[0] and not st.generating  # the new session's views in full


def test_a_session_replaced_after_generates_last_step_still_gets_the_last_word(checkpoints):
    import explorer
    from explorer.session import GenerationSession
    from explorer.ui import events

    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    st = ExplorerState(str(checkpoints["gpt2"]))
    st.start(st.model_name, GenerationSession(loaded, "The quick brown fox"))
    run = events.on_generate(st, 1, "The quick brown fox", False, True, 0.0, 0, 1.0, 0)
    next(run)  # the one step it was asked for
    new = GenerationSession(loaded, "Hello")
    st.start(st.model_name, new)
    (last,) = [*run]
    assert len(last["strip"]) == len(new.token_ids) and "layer" in last
