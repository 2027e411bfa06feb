"""The UI layer's plumbing: names that callbacks use exist on the page, and errors are sorted."""

from __future__ import annotations

import gradio as gr
import pytest

from explorer import lessons
from explorer.analysis import snapshot
from explorer.errors import InputError
from explorer.present.tabs import TAB_IDS, TABS
from explorer.present.views import ExplorerState
from explorer.ui import app, render
from explorer.ui.layout import build_page
from explorer.ui.page import Page
from explorer.ui.render import SETTINGS
from explorer.ui.tab import tab_event
from explorer.ui.tabs import code
from explorer.ui.wiring import on


@pytest.fixture(scope="module")
def page() -> Page:
    with gr.Blocks():
        return build_page("a test secret")


def test_every_name_a_callback_may_update_is_a_component_of_the_page(page):
    names = set(page.names())
    used = {*render.figure_names(), *render.step_views(), *render.SESSION_VIEWS, *render.model_view_names(), *SETTINGS}
    assert used | set(render.SESSION_BUTTONS) | {tab.component for tab in TABS} <= names
    for name in names:
        assert isinstance(getattr(page, name), gr.components.Component | gr.blocks.BlockContext), name


def test_the_tabs_are_listed_once_and_everything_derives_from_the_list(page):
    """Each tab of the registry is a gr.Tab of the page with that id and title, in that order; its
    module draws exactly the figures it names; links and lessons name only tabs of the list."""
    shown = [block for block in page.pick(*(tab.component for tab in TABS))]
    assert [(block.id, block.label) for block in shown] == [(tab.id, tab.title) for tab in TABS]
    assert len(set(TAB_IDS)) == len(TABS) and len({tab.title for tab in TABS}) == len(TABS)
    for tab in TABS:
        assert set(code(tab).FIGURES) <= set(page.names()), tab.id
    assert {step.setup.tab for lesson in lessons.LESSONS for step in lesson.steps} <= set(TAB_IDS)
    assert snapshot.from_query({"model": "m", "text": "a", "tab": "nonsense"}).tab == TABS[0].id


def test_a_page_refuses_two_components_of_one_name():
    with pytest.raises(ValueError, match="two components are named 'status'"), gr.Blocks():
        page = Page()
        page.add(status=gr.Markdown())
        page.add(status=gr.Markdown())


def test_on_turns_named_updates_into_component_updates(page):
    def callback(st, value):
        return {"status": f"got {value}", "kept": None}

    assert on(page, callback)(None, 3) == {page.status: "got 3", page.kept: None}
    assert on(page, lambda: gr.skip())() == gr.skip()

    def streaming(n):
        for i in range(n):
            yield {"status": str(i)}

    assert [*on(page, streaming)(2)] == [{page.status: "0"}, {page.status: "1"}]


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
    from explorer.ui.gradio_private import ExplorerBlocks

    app.build_demo()
    with ExplorerBlocks() as demo:
        page = build_page("a test secret")
        app.wire(demo, page)
    wired = {(block_id, name) for dep in demo.fns.values() for block_id, name in dep.targets}
    buttons = [name for name in page.names() if isinstance(getattr(page, name), gr.Button)]
    expected = {(name, "click") for name in buttons} | {(tab.component, "select") for tab in TABS}
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


def test_generate_sends_the_figures_at_most_every_half_second_and_after_the_last_step(checkpoints, monkeypatch):
    """docs/using.md: Generate streams every step's strip and status, and the figures (and the
    candidates) at most every FIGURES_EVERY_S, and after its last step. Timed on a clock that
    moves 0.2 s each time the callback reads it."""
    import itertools
    import types

    import explorer
    from explorer.session import GenerationSession
    from explorer.ui import events

    now = [0.0]

    def clock():
        now[0] += 0.2
        return now[0]

    monkeypatch.setattr(events, "time", types.SimpleNamespace(perf_counter=clock))
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    st = ExplorerState(str(checkpoints["gpt2"]))
    st.start(st.model_name, GenerationSession(loaded, "The quick brown fox"))
    sent = [(now[0], "candidates" in views) for views in events.on_generate(st, 12, "The quick brown fox", False,
                                                                            True, 0.0, 0, 1.0, 0)]  # fmt: skip
    assert events.FIGURES_EVERY_S == 0.5 and len(sent) >= 12
    with_figures = [t for t, figures in sent if figures]
    assert with_figures[0] == sent[0][0]  # the first step draws them
    # between the first and the last word (which always has them), half a second at least
    assert all(later - earlier >= 0.5 for earlier, later in itertools.pairwise(with_figures[:-1]))
    assert len(with_figures) < len(sent) and sent[-1][1]  # not every step, and the last word has them
