"""Attribution (why this token) on tiny random checkpoints of three families: integrated
gradients adds up to the logit's change, input x gradient is the derivative a finite difference
measures, and the attention-based views are what the session's attention says."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis import attribution
from explorer.errors import InputError
from explorer.model.taps import Intervention
from tests import builders


@pytest.fixture(scope="module", params=list(builders.FAMILY_TEXTS))
def stepped(request, checkpoints):
    return builders.stepped(checkpoints[request.param], builders.FAMILY_TEXTS[request.param], 3)


def newest(session):
    return attribution.chosen_at(session, len(session.token_ids) - 1)


def test_integrated_gradients_add_up_to_the_change_at_32_points(stepped):
    position, token = newest(stepped)
    result = attribution.attribute(stepped, position, token, steps=32, max_steps=32)
    assert result.steps == 32
    change = result.logit - result.baseline_logit
    print(f"sum {result.total:.5f}, change {change:.5f}, error {result.completeness_error:.3%}")
    assert abs(change) > 1e-3  # a real change to account for
    assert result.completeness_error < 0.01
    logits = stepped.full_pass().logits[0, position]
    assert result.logit == pytest.approx(float(logits[token]), abs=1e-4)  # what is explained is the real logit


def test_tokens_the_baseline_keeps_score_nothing(stepped):
    position, token = newest(stepped)
    result = attribution.attribute(stepped, position, token, steps=8, max_steps=8)
    kept = attribution.kept_positions(stepped, stepped.token_ids[: position + 1], "decoder")
    assert any(kept)
    assert np.all(result.scores[kept] == 0)
    if stepped.is_encoder_decoder:
        kept_source = attribution.kept_positions(stepped, stepped.source_ids, "encoder")
        assert kept_source[-1]  # the end-of-source token
        assert np.all(result.source_scores[kept_source] == 0)
        assert np.abs(result.source_scores).sum() > 0


def logit_with_token_scaled(session, position, token, stack, index, factor) -> float:
    """f with token ``index``'s own vector multiplied by ``factor`` (its position vector as it is)."""
    ids = attribution._inputs(session, position)
    vectors = attribution._token_vectors(session, stack, ids[stack])  # (1, T, d)
    extra = torch.zeros_like(vectors)
    extra[:, index] = (factor - 1) * vectors[:, index]
    change = Intervention(f"{stack}.embed", lambda x, run: x + extra, "scale one token")
    with torch.inference_mode():
        if session.is_encoder_decoder:
            memory, _ = session.model.encode(ids["encoder"], interventions=[change])
            logits = session.model(ids["decoder"], memory, interventions=[change]).logits
        else:
            logits = session.model(ids["decoder"], interventions=[change]).logits
    return float(logits[0, -1, token].double())


def test_input_x_gradient_is_the_derivative_a_finite_difference_measures(stepped):
    position, token = newest(stepped)
    result = attribution.attribute(stepped, position, token, "input-x-gradient")
    stacks = [("decoder", result.scores)] + ([("encoder", result.source_scores)] if stepped.is_encoder_decoder else [])
    eps = 1e-2
    for stack, scores in stacks:
        for index in range(len(scores)):
            # d/dε f(x with x_i (1 + ε)) at ε = 0 is x_i · ∂f/∂x_i: the central difference
            up = logit_with_token_scaled(stepped, position, token, stack, index, 1 + eps)
            down = logit_with_token_scaled(stepped, position, token, stack, index, 1 - eps)
            assert scores[index] == pytest.approx((up - down) / (2 * eps), rel=2e-2, abs=2e-3), (stack, index)


def test_a_candidate_is_explained_at_the_step_that_could_have_chosen_it(stepped):
    position = len(stepped.token_ids) - 1
    candidates = stepped.top_candidates(3)
    results = [attribution.attribute(stepped, position, c.token_id, steps=16, max_steps=16) for c in candidates]
    logits = stepped.next_logits()
    for candidate, result in zip(candidates, results, strict=True):
        assert result.logit == pytest.approx(float(logits[candidate.token_id]), abs=1e-4)
    assert not np.allclose(results[0].scores, results[1].scores)


def test_attention_rollout_is_a_distribution_over_the_tokens(stepped):
    if stepped.is_encoder_decoder:
        rows = attribution.cross_attention_rows(stepped, 2)
        expected = np.stack([stepped.cross_attention(i).mean(0)[2] for i in range(stepped.config.n_layers)])
        np.testing.assert_allclose(rows, expected, atol=1e-5)
        return
    position = len(stepped.token_ids) - 2
    rollout = attribution.attention_rollout(stepped, position)
    assert rollout.shape == (position + 1,)
    assert rollout.min() >= 0 and rollout.sum() == pytest.approx(1.0)
    # by hand, from the attention the session kept: each layer's head average, half kept for the residual
    n = position + 1
    by_hand = np.eye(n)
    for layer in range(stepped.config.n_layers):
        by_hand = (0.5 * stepped.self_attention(layer, 0, n)[:, :, :n].mean(0) + 0.5 * np.eye(n)) @ by_hand
    np.testing.assert_allclose(rollout, by_hand[-1], atol=1e-5)


def test_bad_requests_say_what_to_do(stepped):
    with pytest.raises(InputError, match="position 99 does not exist"):
        attribution.attribute(stepped, 99, 1)
    with pytest.raises(InputError, match="Choose one of"):
        attribution.attribute(stepped, 1, 1, method="saliency")
    with pytest.raises(InputError, match="only a generated token"):
        attribution.chosen_at(stepped, 0)


def test_completeness_on_smollm2_with_more_points_where_the_path_is_rough(smollm2):
    """On the real model the path from the baseline can be rough: the points double until
    completeness holds within 1%, and the result says how many it took."""
    session = explorer.GenerationSession(smollm2, "One, two, three, four,")
    session.step()
    position, token = newest(session)
    result = attribution.attribute(session, position, token)
    print(f"{result.steps} points, completeness within {result.completeness_error:.3%}")
    assert result.completeness_error < 0.01
    assert result.steps in (32, 64, 128, 256)


def test_one_progress_bar_over_every_refinement(stepped):
    """A path that needs more points refines 2 → 4 → 8 here (tolerance 0 forces it): the bar only
    moves forward across the refinements and says why it goes on (issue 26: a 35 s Explain that
    seemed stuck was the integral refined to 256 points, 480 in all)."""
    position, token = newest(stepped)
    seen: list[tuple[float, str]] = []
    result = attribution.attribute(stepped, position, token, steps=2, tolerance=0.0, max_steps=8,
                                   progress=lambda share, what: seen.append((share, what)))  # fmt: skip
    assert result.steps == 8
    shares = [share for share, _ in seen]
    assert shares == sorted(shares) and shares[0] >= 0 and shares[-1] <= 1
    assert shares[-1] >= (2 + 4) / 14  # the last level starts after the first two levels' points
    assert "refining" not in seen[0][1] and "refining: 4 points" in seen[-1][1]
