"""Every family the explorer reads, through everything a session offers: steps, undo, a forced
token, the logit lens, head roles, the causal proof and the costs (the parity with transformers
is in test_parity_tiny.py, the cache in test_cache.py)."""

from __future__ import annotations

import numpy as np
import pytest
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import explorer
from explorer.analysis import cost, lens, proof, roles
from explorer.model import ATTENTION

FAMILIES = ["gpt2", "llama", "qwen2", "qwen3", "mistral", "phi3", "opt", "gpt_neox", "gemma3_text", "marian",
            "bart", "mbart", "t5", "flan_t5"]  # fmt: skip


@pytest.mark.parametrize("family", FAMILIES)
def test_a_session_and_its_views_run_on_every_family(checkpoints, family):
    loaded = explorer.load_model(str(checkpoints[family]), progress=False)
    session = explorer.GenerationSession(loaded, "twenty-one on March 3, 2021")
    for _ in range(4):
        session.step()
    tokens = list(session.token_ids)
    session.undo()
    assert session.token_ids == tokens[:-1]
    other = session.top_candidates()[2]
    session.force(other.token_id)
    assert session.token_ids[-1] == other.token_id and session.steps[-1].forced

    n_layers = loaded.config.n_layers
    result = lens.logit_lens(session, k=3)
    assert len(result.rows) == n_layers + 1
    assert result.rows[-1].token_ids == session.next_logits().topk(3).indices.tolist()
    head_roles = roles.head_roles(session)
    assert len(head_roles.tags) == n_layers and len(head_roles.tags[0]) == loaded.config.n_heads
    assert_role_scores_are_the_mean_weights_where_each_role_looks(session, head_roles)
    check = proof.parallel_check(session)
    assert check.max_logit_difference <= 1e-4 and check.max_attention_difference <= 1e-5 and check.same_predictions
    n = len(session.token_ids)
    assert dict(cost.architecture_rows(loaded.config, cost.parameter_count(loaded.model)))
    for use_cache in (True, False):
        assert_step_flops_are_what_torch_counts(loaded, session.token_ids, use_cache)
    measured = session.cache_bytes
    formula = cost.kv_cache_bytes(loaded.config, n, 4, len(session.source_ids))
    assert measured == formula  # each family's own key/value heads and head size
    attention = session.self_attention(n_layers - 1)
    assert attention.shape == (loaded.config.n_heads, n, n) and np.allclose(attention.sum(-1), 1, atol=1e-5)


def assert_step_flops_are_what_torch_counts(loaded, token_ids, use_cache):
    """cost.step_flops equals, to the FLOP, what torch's FlopCounterMode counts in the next step.
    The fused attention kernel's work is invisible to the counter on CPU, so the step runs with
    PyTorch's MATH attention (written out as matrix products, which it counts)."""
    session = explorer.GenerationSession(loaded, "twenty-one on March 3, 2021", use_cache=use_cache)
    while len(session.token_ids) < len(token_ids):  # as long a sequence (the FLOPs do not depend on which tokens)
        session.step()
    positions = len(session.token_ids) + 1
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        session.step()
    expected = cost.step_flops(loaded.config, positions, use_cache, source_positions=len(session.source_ids))
    assert counter.get_total_flops() == expected.total, (use_cache, counter.get_flop_counts()["Global"], expected)


def assert_role_scores_are_the_mean_weights_where_each_role_looks(session, head_roles):
    """The scores recomputed from a full pass's own attention (not the session's kept queries and
    keys), query by query from position 2: the weight on key i - 1, on key 0, on key i; and each
    head's tag the best role above its threshold."""
    trace = session.full_pass(ATTENTION).trace
    n = len(session.token_ids)
    for layer in range(session.config.n_layers):
        probs = trace.self_attention(layer)[0].float().numpy()  # (heads, T, T)
        where = {"previous token": lambda i: i - 1, "first token": lambda i: 0, "self": lambda i: i}
        for role, key in where.items():
            expected = [np.mean([probs[h, i, key(i)] for i in range(2, n)]) for h in range(probs.shape[0])]
            np.testing.assert_allclose(head_roles.scores[role][layer], expected, atol=1e-5)
        for head in range(probs.shape[0]):
            above = {r: v[layer, head] for r, v in head_roles.scores.items() if v[layer, head] >= roles.THRESHOLDS[r]}
            assert head_roles.tag(layer, head) == (max(above, key=above.get) if above else "")
