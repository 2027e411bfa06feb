"""Two runs compared: the cache off agrees with the cache on, another text parts at once, a
branch with heads switched off is measured with the model's own probabilities."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.analysis import compare
from explorer.errors import InputError
from explorer.model.interventions import ablate_heads
from tests.builders import FAMILY_TEXTS, stepped


@pytest.fixture(scope="module", params=list(FAMILY_TEXTS))
def run_a(request, checkpoints):
    return stepped(checkpoints[request.param], FAMILY_TEXTS[request.param], 5)


def test_the_cache_off_gives_the_same_run(run_a):
    result = compare.compare(run_a, compare.branch_of(run_a, "cache-off"), label="with the KV cache off")
    assert result.steps == len(run_a.generated_ids) > 0
    assert result.departs_at is None and all(result.same)
    assert result.kl.max() < 1e-5
    np.testing.assert_allclose(result.p_a_of_b, result.p_b_of_a, atol=1e-5)
    assert np.abs(result.attention_difference(0, None)).max() < 1e-5
    assert "the same" in result.summary() and "with the KV cache off" in result.summary()


def test_heads_switched_off_are_measured_with_each_runs_probabilities(run_a):
    heads = {0: list(range(run_a.config.n_heads))}  # every head of layer 0
    b = compare.branch_of(run_a, "switched-off", interventions=ablate_heads(heads))
    result = compare.compare(run_a, b)
    first = run_a.prompt_length - 1
    with torch.inference_mode():
        probs_b = torch.softmax(b.full_pass().logits[0].float(), -1)  # run B under its own ablation
    for k in range(result.steps):
        token_a = run_a.generated_ids[k]
        assert result.p_b_of_a[k] == pytest.approx(float(probs_b[first + k, token_a]), abs=1e-5)
    # Switching a whole layer's attention off changes the predictions: far beyond the rounding
    # that separates the cache on from the cache off.
    rounding = compare.compare(run_a, compare.branch_of(run_a, "cache-off")).kl.max()
    assert result.kl.max() > 100 * rounding + 1e-8
    difference = result.attention_difference(1, 0)
    assert difference.shape == (len(run_a.token_ids),) * 2


def step_distributions(session) -> torch.Tensor:
    """(generated, vocab): the model's own probabilities at each step, from one whole pass (float64)."""
    with torch.inference_mode():
        logits = session.full_pass().logits[0].double()  # (T, vocab)
    first = session.prompt_length - 1  # the position whose prediction is the first generated token
    return logits[first : first + len(session.generated_ids)].softmax(-1)


def test_another_text_is_compared_step_by_step(run_a):
    """Every figure recomputed here from whole passes of both runs: the probabilities each run gave
    the other's token, and KL(A ‖ B) = Σ p_A log(p_A / p_B)."""
    other = "Transformers generate" if not run_a.is_encoder_decoder else "three hundred"
    b = compare.branch_of(run_a, "text", text=other)
    result = compare.compare(run_a, b)
    assert result.steps == min(len(run_a.generated_ids), len(b.generated_ids)) > 0
    assert result.tokens_b == b.token_texts()[b.prompt_length :][: result.steps]
    p_a, p_b = step_distributions(run_a)[: result.steps], step_distributions(b)[: result.steps]
    ids_a, ids_b = run_a.generated_ids[: result.steps], b.generated_ids[: result.steps]
    for k in range(result.steps):
        assert result.p_a_of_b[k] == pytest.approx(float(p_a[k, ids_b[k]]), abs=1e-5)
        assert result.p_b_of_a[k] == pytest.approx(float(p_b[k, ids_a[k]]), abs=1e-5)
        kl = float((p_a[k] * (p_a[k].clamp_min(1e-30).log() - p_b[k].clamp_min(1e-30).log())).sum())
        assert result.kl[k] == pytest.approx(kl, abs=1e-4, rel=1e-3)
    if not run_a.is_encoder_decoder:  # (a tiny random translator hardly reads its source)
        assert result.kl.max() > 1e-3  # another text: the predictions really differ


def test_other_sampling_uses_its_own_seed(run_a):
    """Run B is the run a fresh session with those settings makes, token for token, and compare()
    reports B's tokens and probabilities of A's."""
    import explorer

    b = compare.branch_of(run_a, "sampling", temperature=1.5, top_k=0, top_p=1.0, seed=7)
    alone = explorer.GenerationSession(run_a.loaded, run_a.text, temperature=1.5, seed=7)
    for _ in range(len(b.generated_ids)):
        alone.step()
    assert b.generated_ids == alone.generated_ids and len(b.generated_ids) <= len(run_a.generated_ids)
    result = compare.compare(run_a, b)
    assert result.tokens_b == b.token_texts()[b.prompt_length :][: result.steps]
    p_b = step_distributions(b)
    for k in range(result.steps):
        assert result.p_b_of_a[k] == pytest.approx(float(p_b[k, run_a.generated_ids[k]]), abs=1e-5)


def test_what_is_missing_is_said(run_a):
    with pytest.raises(InputError, match="Nothing is switched off"):
        compare.branch_of(run_a, "switched-off", interventions=[])
    with pytest.raises(InputError, match="Type run B's text"):
        compare.branch_of(run_a, "text", text="  ")
    with pytest.raises(InputError, match="Choose one of"):
        compare.branch_of(run_a, "weights")
