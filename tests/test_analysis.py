"""The logit lens, the causal proof and its sandbox, head-role scores, costs, saved sessions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis import cost, lens, proof, roles, snapshot
from explorer.model import ATTENTION, ModelConfig
from explorer.session import InputError


@pytest.fixture(scope="module")
def models(checkpoints):
    return {name: explorer.load_model(str(path)) for name, path in checkpoints.items()}


def stepped(loaded, text="the cat sat on the mat", steps=6, **kwargs):
    session = explorer.GenerationSession(loaded, text, **kwargs)
    for _ in range(steps):
        session.step()
    return session


# ---------------------------------------------------------------- logit lens
@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2", "gpt_neox", "gemma3_text", "marian", "bart", "t5"])
def test_logit_lens_last_layer_is_the_real_prediction(models, family):
    session = stepped(models[family])
    result = lens.logit_lens(session, k=5)
    assert [r.label for r in result.rows] == ["embeddings"] + [f"layer {i}" for i in range(session.config.n_layers)]
    last = result.rows[-1]
    real = session.next_token_probabilities()
    values, ids = real.topk(5)
    assert last.token_ids == ids.tolist()
    assert np.allclose(last.probabilities, values.numpy(), atol=1e-5)
    assert result.next_token_id is None  # the newest token has no successor yet


@pytest.mark.parametrize("use_cache", [True, False])
def test_logit_lens_from_the_step_equals_one_parallel_pass(models, use_cache):
    session = stepped(models["llama"], use_cache=use_cache)
    kept = lens.logit_lens(session)  # from the residuals the step kept
    session.newest_residuals = None  # force the parallel pass
    recomputed = lens.logit_lens(session)
    for a, b in zip(kept.rows, recomputed.rows, strict=True):
        assert a.token_ids == b.token_ids and np.allclose(a.probabilities, b.probabilities, atol=1e-5)
    assert session.steps[-1].trace.names() == []  # the session keeps no float32 copy of a step's attention


def test_logit_lens_at_an_earlier_token_marks_what_followed(models):
    session = stepped(models["gpt2"])
    position = session.prompt_length
    result = lens.logit_lens(session, position=position)
    assert result.next_token_id == session.token_ids[position + 1]
    # greedy decoding took the top token of the last layer there
    assert result.rows[-1].token_ids[0] == session.token_ids[position + 1]
    with pytest.raises(InputError, match="does not exist"):
        lens.logit_lens(session, position=len(session.token_ids))


def test_logit_lens_leaves_the_session_alone(models):
    session = stepped(models["llama"])
    before = (list(session.token_ids), session.next_logits(), session.cache.length)
    lens.logit_lens(session)
    assert session.token_ids == before[0] and torch.equal(session.next_logits(), before[1])
    assert session.cache.length == before[2]


# ---------------------------------------------------------------- causal proof
@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2", "gpt_neox", "gemma3_text", "marian", "bart", "t5"])
def test_parallel_pass_equals_the_step_by_step_run(models, family):
    session = stepped(models[family])
    check = proof.parallel_check(session)
    assert check.positions == len(session.token_ids)
    assert check.max_logit_difference <= 1e-4  # what the README claims for these models
    assert check.max_attention_difference <= 1e-5  # on screen: computed from the queries and keys the steps kept
    assert check.same_predictions


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2", "gpt_neox", "gemma3_text", "marian", "bart", "t5"])
def test_without_the_mask_the_future_leaks_and_the_session_is_untouched(models, family):
    session = stepped(models[family])
    tokens, history = list(session.token_ids), session.self_attention(0).copy()
    n = len(tokens)
    above = np.triu(np.ones((n, n), bool), k=1)
    for layer in range(session.config.n_layers):
        sandbox = proof.unmasked_pass(session, layer)
        assert sandbox.layer == layer and sandbox.attention.shape[1:] == (n, n)
        assert (sandbox.attention[:, above] > 0).any()  # weight on later positions
    assert sandbox.future_weight > 0.05
    assert sandbox.max_logit_difference > 1e-3  # earlier positions now predict from the future
    assert session.token_ids == tokens and np.array_equal(session.self_attention(0), history)
    assert (session.self_attention(0)[:, above] == 0).all()


# ---------------------------------------------------------------- head roles on constructed attention
def one_hot_rows(n: int, key_of_query) -> np.ndarray:
    a = np.zeros((1, n, n))
    for i in range(n):
        a[0, i, key_of_query(i)] = 1.0
    return a


def test_role_scores_on_constructed_heads():
    n = 10
    previous = one_hot_rows(n, lambda i: max(i - 1, 0))
    first = one_hot_rows(n, lambda i: 0)
    diagonal = one_hot_rows(n, lambda i: i)
    uniform = np.tril(np.ones((n, n)))[None] / np.arange(1, n + 1)[None, :, None]
    heads = np.concatenate([previous, first, diagonal, uniform])  # (4, n, n)
    assert np.allclose(roles.previous_token_score(heads)[:3], [1, 0, 0])
    assert np.allclose(roles.first_token_score(heads)[:3], [0, 1, 0])
    assert np.allclose(roles.self_score(heads)[:3], [0, 0, 1])
    assert roles.previous_token_score(heads)[3] < 0.3  # spread out: no role
    entropy = roles.row_entropy(heads)
    assert np.allclose(entropy[:3], 0) and entropy[3] > 1.0
    scores = {
        "previous token": roles.previous_token_score(heads)[None],
        "first token": roles.first_token_score(heads)[None],
        "self": roles.self_score(heads)[None],
    }
    assert roles.assign_tags(scores) == [["previous token", "first token", "self", ""]]


def test_induction_score_on_a_constructed_head():
    start, period = 1, 5
    n = start + 2 * period
    induction = one_hot_rows(n, lambda i: i - period + 1 if i >= start + period else 0)
    previous = one_hot_rows(n, lambda i: max(i - 1, 0))
    scores = roles.induction_score(np.concatenate([induction, previous]), start, period)
    assert np.allclose(scores, [1.0, 0.0])


def test_alignment_score_on_constructed_cross_attention():
    t, s = 6, 6
    diagonal = np.eye(t, s)[None]
    backwards = np.eye(t, s)[::-1][None]
    uniform = np.full((1, t, s), 1 / s)
    scores = roles.alignment_score(np.concatenate([diagonal, backwards, uniform]))
    assert scores[0] == pytest.approx(1.0) and scores[1] == pytest.approx(0.0) and scores[2] < 0.2


@pytest.mark.parametrize("family", ["gpt2", "marian"])
def test_head_roles_of_a_model_have_every_layer_and_head(models, family):
    session = stepped(models[family])
    result = roles.head_roles(session)
    c = session.config
    assert all(v.shape == (c.n_layers, c.n_heads) for v in result.scores.values())
    assert ("alignment" in result.scores) == (family == "marian")
    assert len(result.tags) == c.n_layers and all(len(r) == c.n_heads for r in result.tags)
    assert all(v.min() >= 0 and v.max() <= 1 + 1e-6 for v in result.scores.values())
    previous = result.scores["previous token"][0, 0]
    assert result.summary(0, 0).startswith(f"layer 0, head 0: previous token {previous:.2f}")
    # Recomputed from a full pass's own attention: each row's entropy (queries from 2 on) and, for
    # the translator, alignment = the share of rows whose most-read source word does not move
    # back x the mean weight of that word.
    trace = session.full_pass(ATTENTION).trace
    for layer in range(c.n_layers):
        probs = trace.self_attention(layer)[0].float().numpy()[:, 2:]  # (heads, T - 2, T)
        entropy = -(probs * np.log(np.clip(probs, 1e-12, 1))).sum(-1).mean(-1)
        np.testing.assert_allclose(result.entropy[layer], entropy, atol=1e-4)
        if family == "marian":
            cross = trace.cross_attention(layer)[0].float().numpy()  # (heads, T, S)
            peaks = cross.argmax(-1)
            expected = [np.mean(np.diff(p) >= 0) * cross[h].max(-1).mean() for h, p in enumerate(peaks)]
            np.testing.assert_allclose(result.scores["alignment"][layer], expected, atol=1e-5)


def test_head_roles_need_a_few_tokens(models):
    session = explorer.GenerationSession(models["gpt2"], "hi")
    with pytest.raises(InputError, match="at least"):
        roles.head_roles(session)


# ---------------------------------------------------------------- architecture and cost
def test_kv_cache_formula_matches_the_measured_cache(models):
    for family in ("gpt2", "llama", "marian"):
        session = stepped(models[family])
        c = session.config
        source = len(session.source_ids) if c.is_encoder_decoder else 0
        formula = cost.kv_cache_bytes(c, len(session.token_ids), 4, source)
        assert formula == session.cache_bytes


def test_step_flops_hand_computed():
    c = ModelConfig(family="gpt2", vocab_size=100, d_model=8, n_layers=2, n_heads=2, d_ff=32, max_positions=64)
    cached = cost.step_flops(c, positions=10, use_cache=True)
    # per layer: q,k,v,o projections 4 x 2*8*8; scores 4 * 2 heads * 1 row * 10 keys * 4 dims; ffn 2 * 2*8*32
    assert cached.attention_projections == 2 * 4 * 2 * 8 * 8
    assert cached.attention_scores == 2 * 4 * 2 * 1 * 10 * 4
    assert cached.feed_forward == 2 * 2 * 2 * 8 * 32
    assert cached.output_head == 2 * 8 * 100
    uncached = cost.step_flops(c, positions=10, use_cache=False)
    assert uncached.feed_forward == 10 * cached.feed_forward
    assert uncached.attention_scores == 10 * cached.attention_scores  # every row over every key


def test_architecture_rows_name_the_structure(models):
    llama = models["llama"]
    rows = dict(cost.architecture_rows(llama.config, cost.parameter_count(llama.model)))
    assert "RMSNorm" in rows["norm"] and "pre-norm" in rows["norm"]
    assert "rotary" in rows["positions"] and rows["decoder layers"] == str(llama.config.n_layers)
    marian = dict(cost.architecture_rows(models["marian"].config, 1))
    assert "post-norm" in marian["norm"] and "encoder layers" in marian
    bart = dict(cost.architecture_rows(models["bart"].config, 1))
    assert "post-norm" in bart["norm"] and bart["embeddings"].endswith("then normed, in each stack")
    t5 = dict(cost.architecture_rows(models["t5"].config, 1))
    assert t5["positions"].startswith("relative (T5)") and t5["positions"].endswith(
        "(8 buckets, the same past 20 positions)"
    )
    assert t5["score scale"].startswith("q·k × 1 (not 1/√24") and t5["output"].startswith("the last residual × 0.125")
    gemma = dict(cost.architecture_rows(models["gemma3_text"].config, 1))
    assert gemma["attention reach"].startswith("2 local layers (0, 2) read the last 6 positions; the 2 global")
    assert gemma["sublayers"] == "a norm before and after each: x + norm2(f(norm1(x)))"
    assert gemma["positions"].endswith("(theta 10000; 100 in the local layers)")
    assert gemma["score scale"].startswith("q·k × 0.2041 (not 1/√32")


def test_a_cached_step_of_a_sliding_layer_reads_its_window_only():
    c = ModelConfig(family="mistral", vocab_size=100, d_model=8, n_layers=2, n_heads=2, d_ff=32, max_positions=64,
                    sliding_window=4, layer_types=["sliding", "full"])  # fmt: skip
    cached = cost.step_flops(c, positions=10, use_cache=True)
    assert cached.attention_scores == 4 * 2 * 1 * (4 + 10) * 4  # layer 0: 4 keys; layer 1: all 10
    uncached = cost.step_flops(c, positions=10, use_cache=False)
    assert uncached.attention_scores == 2 * 4 * 2 * 10 * 10 * 4  # a whole pass scores every pair, then masks


# ---------------------------------------------------------------- saved sessions and links
@pytest.mark.parametrize("family", ["gpt2", "marian"])
def test_saved_session_restores_tokens_forced_steps_and_attention(models, family):
    loaded = models[family]
    session = stepped(loaded, steps=3)
    session.force(session.top_candidates()[2].token_id)
    session.step()
    snap = snapshot.snapshot_of("tiny", session, layer=1, head="0", query=2, tab="lens")
    data = snapshot.save_bytes(snap, session)
    read, arrays = snapshot.read_bytes(data)
    assert read == snap
    restored = snapshot.restore(loaded, read)
    assert restored.token_ids == session.token_ids
    assert [s.forced for s in restored.steps] == [s.forced for s in session.steps]
    assert snapshot.attention_difference(restored, arrays) <= 1e-3


def test_restoring_damaged_tokens_says_what_was_wrong_with_them(models):
    """Not the advice for a live session ("Undo or Reset"): what is wrong with the file or link."""
    loaded = models["gpt2"]
    eos = loaded.config.eos_token_id
    for generated, says in (
        ([5, eos, 6], "go on after the model's end token"),
        ([5, loaded.config.vocab_size + 7], "outside"),
        ([5] * 200, "holds 200 generated tokens"),
    ):
        with pytest.raises(InputError, match=says) as error:
            snapshot.restore(loaded, snapshot.Snapshot(model="tiny", text="hello", generated=generated))
        assert "Undo" not in str(error.value) and "Reset" not in str(error.value)


def test_a_file_that_is_not_a_session_is_refused():
    for data in (b"", b"hello", b"PK\x03\x04 broken zip"):
        with pytest.raises(InputError, match="not a session"):
            snapshot.read_bytes(data)
    import io

    buffer = io.BytesIO()
    np.savez(buffer, description=np.frombuffer(b'{"format": "other"}', dtype=np.uint8))
    with pytest.raises(InputError, match="not a session"):
        snapshot.read_bytes(buffer.getvalue())
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()], dtype=object), allow_pickle=True)  # a pickle is never loaded
    with pytest.raises(InputError):
        snapshot.read_bytes(buffer.getvalue())


def test_link_round_trip_and_refusals():
    snap = snapshot.Snapshot(model="m", text="a & b = c?", generated=[5, 6, 7], forced=[1], layer=2, head="3", query=4)
    query = snapshot.query_string(snap)
    from urllib.parse import parse_qsl

    assert snapshot.from_query(dict(parse_qsl(query[1:]))) == snap
    assert snapshot.from_query({}) is None
    with pytest.raises(InputError, match="damaged"):
        snapshot.from_query({"model": "m", "text": "t", "tokens": "1,x"})
    with pytest.raises(InputError, match="file instead"):
        snapshot.query_string(snapshot.Snapshot(model="m", text="x" * 20_000))


def test_t5s_relative_position_bias_chart_is_the_models_table(models):
    """Each line is the learned bias of one head at each distance: equal to the bias the model
    adds to the scores (bucketed, flat past the maximum distance)."""
    from explorer.present import insights
    from explorer.present.views import ExplorerState

    loaded = models["t5"]
    session = stepped(loaded, "twenty-one", steps=2)
    state = ExplorerState("t5", session=session, head="2")
    figure = insights.position_bias_figure(state)
    config = loaded.config
    traces = figure["data"]
    assert len(traces) == 2 * config.n_heads  # encoder and decoder, a line per head
    decoder_head_2 = next(t for t in traces if t["xaxis"] == "x2" and t["name"] == "head 2")
    assert decoder_head_2["line"]["width"] == 3 and max(decoder_head_2["x"]) == 0  # the decoder only looks back
    bias = loaded.model.decoder.relative(torch.tensor([29]), 30)[0, 2, 0]  # (keys,): query 29 over keys 0..29
    by_distance = dict(zip(decoder_head_2["x"], decoder_head_2["y"], strict=True))
    for key in range(30):
        assert by_distance[key - 29] == pytest.approx(float(bias[key]), abs=1e-6)
    far = [by_distance[d] for d in by_distance if d <= -config.relative_max_distance]
    assert len(set(far)) == 1  # one bucket for everything at or past the maximum distance
    assert insights.position_bias_figure(ExplorerState("gpt2", session=stepped(models["gpt2"], steps=1))) is None
