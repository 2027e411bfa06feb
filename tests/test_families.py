"""Every family the explorer reads, through everything a session offers: steps, undo, a forced
token, the logit lens, head roles, the causal proof and the costs (the parity with transformers
is in test_parity_tiny.py, the cache in test_cache.py)."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.analysis import cost, lens, proof, roles

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
    check = proof.parallel_check(session)
    assert check.max_logit_difference <= 1e-4 and check.max_attention_difference <= 1e-5 and check.same_predictions
    n = len(session.token_ids)
    flops = cost.step_flops(loaded.config, n, use_cache=True, source_positions=len(session.source_ids))
    assert flops.total > 0 and dict(cost.architecture_rows(loaded.config, cost.parameter_count(loaded.model)))
    measured = session.cache_bytes
    formula = cost.kv_cache_bytes(loaded.config, n, 4, len(session.source_ids))
    assert measured == formula  # each family's own key/value heads and head size
    attention = session.self_attention(n_layers - 1)
    assert attention.shape == (loaded.config.n_heads, n, n) and np.allclose(attention.sum(-1), 1, atol=1e-5)
