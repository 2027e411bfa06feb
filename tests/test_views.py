"""What the page's callbacks check before they change a tab's state."""

from __future__ import annotations

import itertools

import pytest

import explorer
from explorer.present import model_store, views
from explorer.present.views import MEAN, ExplorerState, checked_query, checked_view, strip_colors
from explorer.session import InputError


@pytest.fixture(scope="module")
def session(checkpoints):
    return explorer.GenerationSession(explorer.load_model(str(checkpoints["gpt2"])), "Hello there")


@pytest.mark.parametrize(("layer", "head"), [(0, MEAN), (1, "3"), ("1", "0")])
def test_views_that_exist_are_taken(session, layer, head):
    assert checked_view(session, layer, head) == (int(layer), head)


@pytest.mark.parametrize(
    ("layer", "head", "says"),
    [(99, MEAN, "layer 99"), (-1, MEAN, "layer -1"), ("x", MEAN, "whole number"), (None, MEAN, "whole number"),
     (0, "4", "head '4'"), (0, "-1", "head '-1'"), (0, "../x", "head '../x'")],
)  # fmt: skip
def test_views_that_do_not_exist_say_what_to_choose(session, layer, head, says):
    with pytest.raises(InputError, match="choose") as error:
        checked_view(session, layer, head)
    assert says in str(error.value)


def test_queries_outside_the_sequence_are_refused(session):
    assert checked_query(session, 0) == 0
    for index in (-1, len(session.token_ids), "2", None):
        with pytest.raises(InputError):
            checked_query(session, index)


def test_a_new_session_keeps_the_view_where_the_model_has_it(session, checkpoints):
    state = ExplorerState("tiny", layer=1, head="3")
    state.start("tiny", session)
    assert (state.layer, state.head) == (1, "3")
    smaller = explorer.GenerationSession(explorer.load_model(str(checkpoints["marian"])), "twenty-one")
    state.query = 2
    state.start("marian", smaller)  # 2 layers, 4 heads: layer 1 stays, head 3 stays
    assert (state.model_name, state.layer, state.head, state.query) == ("marian", 1, "3", None)
    state.layer, state.head = 5, "7"
    state.start("marian", smaller)
    assert (state.layer, state.head) == (1, MEAN)


def test_release_drops_the_session(session):
    state = ExplorerState("tiny", session=session)
    state.release()
    assert state.session is None and state.comparison is None


def test_a_local_folder_shows_relative_to_its_allowed_folder(session, checkpoints, monkeypatch):
    folder = checkpoints["gpt2"]
    monkeypatch.setenv(model_store.MODEL_DIRS_ENV, str(folder.parent))
    resolved = model_store.resolve_custom(folder.name)
    assert resolved == str(folder.resolve())  # the server works with the absolute path...
    assert model_store.public_name(resolved) == folder.name  # ...the page and links show this
    assert model_store.resolve_custom(model_store.public_name(resolved)) == resolved  # and a link comes back
    assert model_store.public_name("/somewhere/else/model") == "model"  # never a path outside the allowed ones
    assert model_store.public_name("en-de-numbers") == "en-de-numbers"
    state = ExplorerState(resolved, session)
    assert str(folder.parent) not in views.status_line(state)


def test_the_all_heads_image_is_a_png_in_gradios_cache_with_the_grids_pixels(session, tmp_path, monkeypatch):
    """Written by us at zlib's fastest level, where Gradio serves files from without copying them."""
    import numpy as np
    from PIL import Image

    from explorer.ui.images import heads_image
    from explorer.viz import head_grid

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    state = ExplorerState(session=session, model_name="gpt2", layer=1)
    path = heads_image(state)
    assert path.startswith(str(tmp_path)) and path.endswith(".png")
    expected = head_grid(session.self_attention(1), causal=True)
    assert np.array_equal(np.asarray(Image.open(path).convert("RGB")), np.asarray(expected.convert("RGB")))
    assert heads_image(state) == path  # the same image: the same file
    assert [p.name for p in (tmp_path).rglob("*") if p.is_file()] == ["image.png"]  # no partial file left


def test_a_replaced_session_is_freed_at_once_after_every_tab_was_shown(checkpoints, tmp_path, monkeypatch):
    """What a Reset or a new text does to the old session, after the tab's views read it: its
    tensors go with its last reference, not at Python's rare full collection (issue 12)."""
    import gc
    import weakref

    from explorer.present.tabs import TAB_IDS
    from explorer.ui.render import render

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    loaded = explorer.load_model(str(checkpoints["marian"]), progress=False)
    state = ExplorerState("tiny", explorer.GenerationSession(loaded, "one two three"))
    gc.disable()
    try:
        state.session.step()
        for tab in TAB_IDS:
            state.tab = tab
            render(state, full=True)
        old = weakref.ref(state.session)
        state.start("tiny", explorer.GenerationSession(loaded, "four five"))
        assert old() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("translator", [False, True])
def test_every_kind_of_token_in_the_strip_has_a_colour_apart(translator):
    """Fresh eyes took a token they had chosen (forced, #dadaeb) for a prompt token (#dbe9f6):
    the colours of one legend are at least 60 apart (the sum of the red, green and blue gaps)."""
    colours = strip_colors(translator)

    def rgb(hex_colour: str) -> list[int]:
        return [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]

    for a, b in itertools.combinations(colours, 2):
        gap = sum(abs(x - y) for x, y in zip(rgb(colours[a]), rgb(colours[b]), strict=True))
        assert gap >= 60, (a, b, gap)


def test_the_candidates_title_says_whose_distribution_it_is(checkpoints):
    """Before a step the table lists what may come next; after one, what the last token was chosen
    from (a stranger read "Next-token candidates" with a ✓ on the token already in the strip)."""
    session = explorer.GenerationSession(explorer.load_model(str(checkpoints["llama"])), "one two")
    assert views.candidates_label(session) == views.NEXT_CANDIDATES
    session.step()
    assert views.candidates_label(session) == views.LAST_CANDIDATES
    assert "last token was chosen from" in views.LAST_CANDIDATES
    session.undo()
    assert views.candidates_label(session) == views.NEXT_CANDIDATES
