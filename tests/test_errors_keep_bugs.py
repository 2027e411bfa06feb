"""Errors that cannot hide bugs (issue 27, step 5): a user's mistake is not a ValueError, and no
broad catch turns a bug into a friendly message without the bug reaching the log."""

from __future__ import annotations

import json
import logging

import pytest
import torch

import explorer
from explorer.errors import InputError
from explorer.loading import ModelLoadError, families, sources
from explorer.loading import checkpoints as checkpoint_files
from explorer.model import ContextWindowError


def test_user_errors_are_not_a_builtin_a_library_raises():
    for error in (InputError, ContextWindowError, ModelLoadError):
        assert not issubclass(error, (ValueError, TypeError, KeyError)), error
    with pytest.raises(InputError):  # and `except ValueError` no longer swallows one
        try:
            raise InputError("Shorten the text.")
        except ValueError:
            pytest.fail("a ValueError handler caught a user's mistake")


def test_a_missing_config_field_is_the_files_fault_and_says_which(checkpoints):
    config = {"model_type": "gpt2", "vocab_size": 10, "n_layer": 1, "n_head": 1, "n_positions": 8}  # no n_embd
    with pytest.raises(families.MissingConfigField, match="has no 'n_embd'"):
        families.convert(config, {})


def test_a_bug_in_a_config_function_reaches_the_log_as_a_bug(monkeypatch, caplog):
    """A KeyError of the function's own propagates; a TypeError is told to the user as a
    malformed file (it cannot be told apart) and logged with its traceback."""

    def looks_up_a_wrong_table(hf):
        return {}["a key the code got wrong"]

    monkeypatch.setitem(families.FAMILIES, "gpt2", families.Family(looks_up_a_wrong_table, None))
    with pytest.raises(KeyError, match="a key the code got wrong"):
        families.convert({"model_type": "gpt2"}, {})

    def adds_a_string(hf):
        return hf["n_embd"] + "px"

    monkeypatch.setitem(families.FAMILIES, "gpt2", families.Family(adds_a_string, None))
    with caplog.at_level(logging.ERROR, logger="decoder_explorer"), pytest.raises(ModelLoadError) as error:
        families.convert({"model_type": "gpt2", "n_embd": 64}, {})
    assert isinstance(error.value.__cause__, TypeError)
    logged = next(r for r in caplog.records if "a bug in" in r.getMessage() and "adds_a_string" in r.getMessage())
    assert logged.exc_info and isinstance(logged.exc_info[1], TypeError)


def test_a_memory_error_reading_weights_is_not_called_a_damaged_file(checkpoints, monkeypatch):
    def out_of_memory(path):
        raise MemoryError

    monkeypatch.setattr(checkpoint_files, "load_file", out_of_memory)
    with pytest.raises(MemoryError):
        checkpoint_files.read_hf_folder(checkpoints["gpt2"])


def test_a_tokenizer_that_cannot_be_read_is_told_by_kind_and_logged_with_its_traceback(
    checkpoints, monkeypatch, caplog
):
    """Tokenizer files fail in many libraries' ways, which cannot be told from a bug: the user hears
    the kind (no path), the log gets the whole traceback."""
    from transformers import AutoTokenizer

    def broken(*args, **kwargs):
        raise AttributeError("'NoneType' object has no attribute 'vocab'")

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", broken)
    with caplog.at_level(logging.ERROR, logger="decoder_explorer"), pytest.raises(ModelLoadError) as error:
        checkpoint_files.load_tokenizer(checkpoints["gpt2"])
    assert "(AttributeError)" in str(error.value) and str(checkpoints["gpt2"].parent) not in str(error.value)
    logged = next(r for r in caplog.records if "reading the tokenizer" in r.getMessage())
    assert isinstance(logged.exc_info[1], AttributeError)


def test_a_bug_in_the_offline_hub_look_up_is_not_called_a_missing_network(monkeypatch):
    import huggingface_hub

    def broken(*args, **kwargs):
        raise TypeError("snapshot_download() got an unexpected keyword argument")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", broken)
    with pytest.raises(TypeError, match="unexpected keyword"):
        sources.hub_snapshot("owner/name")


def test_the_experiment_helpers_compose_in_any_mix(checkpoints):
    """ablate_heads returns a list, ablate_sublayer and patch one intervention: any mix works;
    anything else is a TypeError that says what was expected."""
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    text = "the cat sat on the mat"
    other = explorer.GenerationSession(loaded, "the dog sat on the mat")
    heads, sublayer = explorer.ablate_heads({1: [0]}), explorer.ablate_sublayer(0, "mlp")
    patched = explorer.patch("decoder.1.resid_after_ffn", [1], other)
    mixed = [heads, sublayer, patched]  # a list, an Intervention, an Intervention
    session = explorer.GenerationSession(loaded, text, interventions=mixed)
    assert session.interventions == (*heads, sublayer, patched)
    flat = explorer.GenerationSession(loaded, text, interventions=[*heads, sublayer, patched])
    assert torch.equal(session.full_pass().logits, flat.full_pass().logits)
    for wrong in ("decoder.0.mlp", [{"tap": "decoder.0.mlp"}], 3):
        with pytest.raises(TypeError, match="interventions must be Interventions"):
            explorer.GenerationSession(loaded, text, interventions=wrong)


@pytest.mark.parametrize("name", ["gpt2", "marian"])
def test_the_models_own_call_takes_the_helpers_interventions_in_any_mix(checkpoints, name):
    """model(ids, interventions=[ablate_heads(...), ablate_sublayer(...)]): a list beside an
    Intervention, as the session takes them (issue 42: 'list' object has no attribute 'tap')."""
    loaded = explorer.load_model(str(checkpoints[name]), progress=False)
    model, ids = loaded.model, torch.tensor([[1, 2, 3, 4]])
    heads, sublayer = explorer.ablate_heads({0: [0]}), explorer.ablate_sublayer(0, "mlp")
    with torch.no_grad():
        memory = (model.encode(ids)[0],) if loaded.config.is_encoder_decoder else ()
        mixed = model(ids, *memory, interventions=[heads, sublayer]).logits
        flat = model(ids, *memory, interventions=[*heads, sublayer]).logits
        plain = model(ids, *memory).logits
    assert torch.equal(mixed, flat) and not torch.equal(mixed, plain)


def refusal_keeps_its_cause(call) -> InputError:
    """The InputError ``call`` raises, with the PolicyError it came from as its cause (issue 42:
    ``from None`` left the log unable to tell a policy's bug from a refusal)."""
    from explorer.cache_policies import PolicyError

    with pytest.raises(InputError) as refused:
        call()
    assert isinstance(refused.value.__cause__, PolicyError), f"{refused.value!r} lost its cause"
    return refused.value


@pytest.mark.parametrize("spec", ["window:0", "int8:32:16+window:8:cache"])
def test_a_policy_written_wrong_is_refused_with_the_policy_error_as_its_cause(spec):
    from explorer import cache_policies as cp

    refusal_keeps_its_cause(lambda: cp.parse_policy(spec))


def test_a_policy_the_model_cannot_run_is_refused_with_the_policy_error_as_its_cause(checkpoints):
    """Mistral's sliding layers count the text's positions: the session, and the KV-cache lab's
    events, refuse positions within the cache (StreamingLLM's renumbering), keeping the PolicyError
    that says why. (The budget curve leaves that policy out on such a model, and refuses none.)"""
    from explorer import cache_policies as cp
    from explorer.present.views import ExplorerState
    from explorer.ui.tabs import kv_cache

    loaded = explorer.load_model(str(checkpoints["mistral"]), progress=False)
    renumbered = cp.sinks(2, 6, cache_positions=True)
    refusal_keeps_its_cause(lambda: explorer.GenerationSession(loaded, "the cat", cache_policy=renumbered))
    st = ExplorerState(str(checkpoints["mistral"]))
    st.start(st.model_name, explorer.GenerationSession(loaded, "the cat sat on the mat"))
    for _ in range(3):  # the lab compares the steps taken
        st.session.step()
    refusal_keeps_its_cause(
        lambda: kv_cache.on_lab_run.__wrapped__(st, "sinks_cache", 8, 2, progress=lambda *a, **k: None)
    )
    refusal_keeps_its_cause(lambda: kv_cache.restarted(st, renumbered))


def test_a_cached_config_this_version_cannot_read_is_logged_once_and_converted_again(tmp_path, caplog):
    """A TypeError from ModelConfig.from_json (fields it does not take) is no damaged file: the
    log says what it is, once, and that the model will be converted again (issue 42: silently,
    on every start)."""
    source = {"gguf": "model.gguf", "size": 1, "format": 1}
    (tmp_path / "source.json").write_text(json.dumps(source))
    (tmp_path / checkpoint_files.OUR_CONFIG).write_text(json.dumps({"a_field_of_another_version": 1}))
    with caplog.at_level(logging.WARNING, logger="decoder_explorer"):
        assert checkpoint_files.read_converted(tmp_path, source) is None
    said = [r.getMessage() for r in caplog.records if r.name == "decoder_explorer"]
    assert len(said) == 1, said
    assert "TypeError" in said[0] and "a_field_of_another_version" in said[0] and "converting it again" in said[0]
