"""The server's model store (issue 58): one copy of each model, held by the sessions that use it,
let go under a memory budget or on an unload only when no session uses it, and only the models the
operator offers. Tiny checkpoints, loaded by folder, stand in for the real models."""

from __future__ import annotations

import gc

import pytest

import explorer
from explorer.loading import LoadedModel, ModelLoadError
from explorer.present import model_store
from tests import builders


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("store")
    return {
        "a": str(builders.tiny_gpt2(root / "a")),
        "b": str(builders.tiny_gpt2(root / "b", seed=1)),
        "c": str(builders.tiny_llama(root / "c")),
    }


@pytest.fixture
def store(folders):
    """The store with none of this file's models in it before and after a test."""
    for name in folders.values():
        model_store.unload_model(name)
    yield folders
    gc.collect()
    for name in folders.values():
        model_store.unload_model(name)


def copies(name: str) -> int:
    """How many LoadedModel objects of ``name``'s folder are alive in this process."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is LoadedModel and o.name == name.rsplit("/", 1)[-1])


def test_unload_and_reload_cycles_never_make_a_second_copy(store):
    """The issue: any tab's Unload dropped the store's copy while sessions kept it, and the next load
    made another (~600 MB a cycle for SmolLM2, 4 cycles: +2.4 GB). Today: the same object every time."""
    name = store["a"]
    sessions = [explorer.GenerationSession(model_store.get_model(name, progress=False), "hello")]
    first = sessions[0].loaded
    for _ in range(4):
        unloaded = model_store.unload_model(name)
        assert unloaded == model_store.Unloaded(was_loaded=True, users=len(sessions), freed=False)
        again = model_store.get_model(name, progress=False)
        assert again is first and copies(name) == 1
        sessions.append(explorer.GenerationSession(again, "hello again"))
    assert len(first.users) == 5


def test_a_model_let_go_but_still_read_is_taken_back_not_loaded_again(store):
    """A caller that holds the model without a session yet (between get_model and its session): the
    store let it go, but the next get_model takes that copy back."""
    name = store["a"]
    held = model_store.get_model(name, progress=False)
    for _ in range(2):  # let go twice: still read
        assert model_store.unload_model(name) == model_store.Unloaded(was_loaded=True, users=0, freed=False)
    assert model_store.get_model(name, progress=False) is held and copies(name) == 1


def test_an_unload_that_no_session_holds_frees_the_model(store):
    name = store["a"]
    session = explorer.GenerationSession(model_store.get_model(name, progress=False), "hello")
    del session
    assert model_store.unload_model(name) == model_store.Unloaded(was_loaded=True, users=0, freed=True)
    assert not model_store.is_loaded(name) and copies(name) == 0
    assert model_store.unload_model(name) == model_store.Unloaded(was_loaded=False, users=0, freed=False)


def test_a_forked_session_holds_its_model_too(store):
    """A class following its teacher forks the teacher's session (no __init__ runs)."""
    name = store["a"]
    teacher = explorer.GenerationSession(model_store.get_model(name, progress=False), "hello")
    follower = teacher.fork()
    del teacher
    assert model_store.unload_model(name).users == 1 and follower.loaded is model_store.get_model(name)


def test_the_budget_lets_go_of_the_least_recently_used_model_no_session_holds(store, monkeypatch):
    a, b, c = store["a"], store["b"], store["c"]
    held = explorer.GenerationSession(model_store.get_model(a, progress=False), "hello")  # used least recently
    model_store.get_model(b, progress=False)  # no session: free to go
    sizes = {name: model_store.weight_bytes(model_store.already_loaded(name)) for name in (a, b)}
    budget_mb = (sizes[a] + sizes[b] + 1) / 2**20  # a and b fit; a third does not
    monkeypatch.setenv(model_store.MODEL_MEMORY_ENV, str(budget_mb))
    loaded_c = model_store.get_model(c, progress=False)
    assert model_store.is_loaded(a) and held.loaded is model_store.get_model(a, progress=False)  # held: stays
    assert not model_store.is_loaded(b) and copies(b) == 0  # the least recently used unheld one went
    assert model_store.already_loaded(c) is loaded_c  # the one just loaded stays, though over the budget


def test_a_model_the_operator_does_not_offer_is_refused_and_not_listed(monkeypatch):
    monkeypatch.setenv(model_store.MODELS_ENV, "en-de-numbers")
    monkeypatch.delenv(model_store.MODEL_ENV, raising=False)
    for ask in (model_store.get_model, model_store.resolve_custom):
        with pytest.raises(ModelLoadError, match=r"'smollm2-135m-instruct' is not offered on this server.*en-de"):
            ask("smollm2-135m-instruct")
    with pytest.raises(ModelLoadError, match="not offered"):
        model_store.resolve_custom(" gemma-3-270m ")
    assert [name for _, name in model_store.dropdown_choices()] == ["en-de-numbers"]
    assert model_store.default_model_name() == "en-de-numbers"  # the default is not offered: the first that is
    assert [e.name for e in model_store.offered_models()] == ["en-de-numbers"]


@pytest.mark.parametrize("name", [None, {"name": "en-de-numbers"}, ["en-de-numbers"], 3, b"x" * 5_000_000])
def test_a_model_name_that_is_not_text_is_a_refusal_with_the_value_cut(name):
    """The issue: None.strip() in resolve_custom, a traceback, from /step, /load_model and the custom box."""
    for ask in (model_store.get_model, model_store.resolve_custom):
        with pytest.raises(ModelLoadError, match="A model is named by text") as refused:
            ask(name)
        assert len(str(refused.value)) < 120


def test_one_tabs_unload_does_not_free_a_model_another_tabs_session_holds(store, monkeypatch):
    """Two models' "Unload the second model": it refused only the caller's own page model, so any tab
    took a model from every other tab. Now the other tab keeps it, and the message says so."""
    import gradio as gr

    from explorer.present.views import ExplorerState
    from explorer.ui.tabs import two_models

    said = []
    monkeypatch.setattr(gr, "Info", said.append)
    mine = ExplorerState(store["a"], session=explorer.GenerationSession(model_store.get_model(store["a"]), "hello"))
    theirs = ExplorerState(store["b"], session=explorer.GenerationSession(model_store.get_model(store["b"]), "hello"))
    shown = two_models.on_unload(mine, store["b"])
    assert "stays loaded: 1 other session uses it" in shown["two_models_info"] and said == [shown["two_models_info"]]
    assert model_store.get_model(store["b"]) is theirs.session.loaded and copies(store["b"]) == 1
    theirs.release()  # the other tab closed: now nothing holds it
    assert "is unloaded and its memory freed" in two_models.on_unload(mine, store["b"])["two_models_info"]
    assert copies(store["b"]) == 0 and mine.session.loaded is model_store.get_model(store["a"])


@pytest.mark.parametrize("name", [None, ["en-de-numbers"], {"name": "en-de-numbers"}, 3])
def test_a_name_that_is_no_text_is_not_loaded_and_its_load_is_refused(name):
    """The page asks ``is_loaded`` before a load (is it heavy work?): a raw call's list was a TypeError."""
    assert model_store.is_loaded(name) is False
    with pytest.raises(ModelLoadError):
        model_store.get_model(name)
