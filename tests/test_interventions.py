"""Taps and interventions (explorer/model/taps.py, interventions.py) on tiny random checkpoints of
the three families: each intervention does exactly what it says, and nothing else."""

from __future__ import annotations

import copy

import pytest
import torch

import explorer
from explorer.analysis.cache_modes import compare_cache_modes
from explorer.model import Record, ablate_heads, ablate_sublayer, patch_values, taps
from explorer.model.taps import Intervention

FAMILIES = ["gpt2", "llama", "gpt_neox", "marian"]
SOURCE = "twenty one and more"


@pytest.fixture(scope="module", params=FAMILIES)
def loaded(request, checkpoints):
    return explorer.load_model(str(checkpoints[request.param]))


def ids_of(loaded, n: int = 7, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(5, loaded.config.vocab_size, (1, n), generator=generator)  # (1, n)


def run(loaded, ids, model=None, **kwargs):
    """The model's logits (1, T, vocab) for ``ids`` (a translator's decoder reads SOURCE's memory)."""
    model = model or loaded.model
    with torch.inference_mode():
        if loaded.is_encoder_decoder:
            source = torch.tensor([loaded.tokenizer(SOURCE)["input_ids"]])
            memory, _ = model.encode(source, interventions=kwargs.get("interventions", ()))
            return model(ids, memory, **kwargs)
        return model(ids, **kwargs)


def test_zero_ablating_a_head_is_removing_its_slice_of_the_output_projection(loaded):
    c = loaded.config
    layer, head = c.n_layers - 1, 1
    ids = ids_of(loaded)
    ablated = run(loaded, ids, interventions=ablate_heads({layer: [head]})).logits
    by_hand = copy.deepcopy(loaded.model)
    with torch.no_grad():
        by_hand.decoder.layers[layer].self_attn.o_proj.weight[:, head * c.head_dim : (head + 1) * c.head_dim] = 0
    torch.testing.assert_close(ablated, run(loaded, ids, model=by_hand).logits, atol=1e-5, rtol=0)
    assert (ablated - run(loaded, ids).logits).abs().max() > 1e-4  # and the head did matter


def test_ablating_nothing_changes_nothing_bit_for_bit(loaded):
    ids = ids_of(loaded)
    plain = run(loaded, ids).logits
    nothing = [
        Intervention("decoder.0.self_attn.z", lambda x, r: x, "the identity"),
        *ablate_heads({0: []}),
        patch_values("decoder.0.resid_after_ffn", [], torch.zeros(1, 7, loaded.config.d_model)),
    ]
    assert torch.equal(run(loaded, ids, interventions=nothing).logits, plain)


def test_patching_a_layer_from_itself_changes_nothing_and_from_another_run_gives_that_run(loaded):
    layer = 0
    tap = f"decoder.{layer}.resid_after_ffn"
    ids, other = ids_of(loaded, seed=1), ids_of(loaded, seed=2)
    own = run(loaded, ids, record=Record.taps(tap)).trace[tap]
    torch.testing.assert_close(
        run(loaded, ids, interventions=[patch_values(tap, range(7), own)]).logits, run(loaded, ids).logits,
        atol=0, rtol=0,
    )  # fmt: skip
    theirs = run(loaded, other, record=Record.taps(tap)).trace[tap]
    patched = run(loaded, ids, interventions=[patch_values(tap, range(7), theirs)]).logits
    torch.testing.assert_close(patched, run(loaded, other).logits, atol=1e-5, rtol=0)
    one = run(loaded, ids, interventions=[patch_values(tap, [3], theirs)]).logits
    torch.testing.assert_close(one[:, :3], run(loaded, ids).logits[:, :3], atol=0, rtol=0)  # the past is untouched
    assert (one[:, 3:] - run(loaded, ids).logits[:, 3:]).abs().max() > 1e-4


def test_ablating_a_sublayer_zeroes_what_it_adds(loaded):
    tap = "decoder.0.resid_after_attn"
    ids = ids_of(loaded)
    before = run(loaded, ids, record=Record.taps("decoder.0.self_attn.input", tap))
    after = run(loaded, ids, record=Record.taps(tap), interventions=[ablate_sublayer(0, "attention")]).trace[tap]
    if loaded.config.norm_first:  # pre-norm: x + 0
        expected = loaded.model.decoder.embed(ids, torch.arange(7))
    else:  # post-norm: norm(x + 0), x being the sublayer's input
        expected = loaded.model.decoder.layers[0].self_attn_norm(before.trace["decoder.0.self_attn.input"])
    torch.testing.assert_close(after, expected, atol=1e-5, rtol=0)


def test_mean_ablation_is_each_positions_mean_of_the_text_so_far(loaded):
    tap = "decoder.1.self_attn.z"
    ids = ids_of(loaded)
    clean = run(loaded, ids, record=Record.taps(tap)).trace[tap]  # (1, heads, T, hd)
    kept = run(loaded, ids, record=Record.taps(tap), interventions=ablate_heads({1: [0, 2]}, "mean")).trace[tap]
    for t in (0, 3, 6):
        torch.testing.assert_close(kept[0, [0, 2], t], clean[0, [0, 2], : t + 1].mean(dim=1), atol=1e-6, rtol=0)
    torch.testing.assert_close(kept[0, 1], clean[0, 1], atol=0, rtol=0)  # the other heads are untouched


def test_a_branch_reruns_the_tokens_and_steps_the_same_with_the_cache_on_and_off(loaded):
    session = explorer.GenerationSession(loaded, SOURCE)
    for _ in range(3):
        session.step()
    before = list(session.token_ids)
    heads = ablate_heads({loaded.config.n_layers - 1: [0, 1]})
    branch = session.with_interventions(heads)
    assert branch.token_ids == before and session.token_ids == before and session.interventions == ()
    uncached = session.with_interventions(heads)
    uncached.set_use_cache(False)
    for _ in range(6):
        if branch.finished:
            break
        branch.step()
        uncached.step()
        torch.testing.assert_close(branch.next_logits(), uncached.next_logits(), atol=1e-4, rtol=0)
    assert branch.token_ids == uncached.token_ids
    comparison = compare_cache_modes(session.with_interventions(heads))
    assert comparison.tokens_identical


def test_a_mean_ablation_branch_runs_without_the_cache(loaded):
    session = explorer.GenerationSession(loaded, SOURCE)
    branch = session.with_interventions(ablate_heads({0: [0]}, "mean"))
    assert not branch.use_cache and branch.cache is None
    branch.step()
    with pytest.raises(explorer.InputError, match="without the cache"):
        branch.set_use_cache(True)


def test_a_patch_from_another_session(loaded):
    """explorer.patch takes the values from another session's run."""
    clean = explorer.GenerationSession(loaded, "a b")  # two texts every tiny tokenizer splits alike
    corrupt = explorer.GenerationSession(loaded, "b a")
    if loaded.is_encoder_decoder:  # the texts are sources: the encoder's output carries the difference
        tap, ids = "encoder.memory", (clean.source_ids, corrupt.source_ids)
    else:
        tap, ids = f"decoder.{loaded.config.n_layers - 1}.resid_after_ffn", (clean.token_ids, corrupt.token_ids)
    assert len(ids[0]) == len(ids[1]) and ids[0] != ids[1]
    patched = corrupt.with_interventions([explorer.patch(tap, range(len(ids[0])), clean)])
    torch.testing.assert_close(patched.next_logits(), clean.next_logits(), atol=1e-5, rtol=0)


def test_nothing_recorded_or_changed_runs_no_tap_and_the_fused_kernel(loaded, monkeypatch):
    from explorer.model import attention

    visits, eager = [], []
    original_visit, original_eager = taps.Run.visit, attention.attention
    monkeypatch.setattr(taps.Run, "visit", lambda self, tap, x: visits.append(tap.name) or original_visit(self, tap, x))
    monkeypatch.setattr(attention, "attention", lambda *a, **k: eager.append(1) or original_eager(*a, **k))
    ids = ids_of(loaded)
    run(loaded, ids)
    assert not visits and not eager  # no run at all: every tap is the identity
    run(loaded, ids, interventions=ablate_heads({0: [0]}))
    assert visits and not eager  # a head's output is changed after the fused kernel
    run(loaded, ids, record=Record.of("attention"))
    assert eager  # probabilities asked for: attention written out


@pytest.mark.parametrize(
    ("intervention", "says"),
    [
        (lambda: [Intervention("decoder.99.self_attn.z", lambda x, r: x, "layer 99")], "no tap 'decoder.99"),
        (lambda: ablate_heads({0: [42]}), "heads [42]"),
        (lambda: ablate_heads({0: [0]}, "shuffle"), "choose one of zero, mean"),
        (lambda: [ablate_sublayer(0, "norm")], "choose one of attention, mlp"),
        (lambda: [patch_values("decoder.0.self_attn.k", [0], torch.zeros(1))], "cannot be patched by position"),
        (lambda: [patch_values("decoder.0.resid_after_ffn", [9], torch.zeros(1, 7, 4))], "positions 0 to 6"),
    ],
)  # fmt: skip
def test_a_wrong_intervention_says_what_is_wrong(loaded, intervention, says):
    with pytest.raises(ValueError) as error:
        run(loaded, ids_of(loaded), interventions=intervention())
    assert says in str(error.value)


def test_finishing_a_pass_from_a_layer_is_the_rest_of_the_whole_pass(loaded):
    """What activation patching reruns: from the residual entering layer k, the same last logits."""
    ids = ids_of(loaded)
    names = ["decoder.embed"] + [f"decoder.{i}.resid_after_ffn" for i in range(loaded.config.n_layers)]
    out = run(loaded, ids, record=Record.taps(*names))
    memory = None
    if loaded.is_encoder_decoder:
        with torch.inference_mode():
            memory, _ = loaded.model.encode(torch.tensor([loaded.tokenizer(SOURCE)["input_ids"]]))
    for layer in range(loaded.config.n_layers):
        with torch.inference_mode():
            finished = loaded.model.finish_from(out.trace[names[layer]], layer, memory)
        torch.testing.assert_close(finished, out.logits[:, -1], atol=1e-5, rtol=0)
