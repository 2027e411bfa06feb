"""The KV-cache lab (issue 29): a session's text rerun under a policy beside the full cache, what
its figures show, and the checks on what the page's controls send."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer import cache_policies as cp
from explorer.analysis.cache_lab import EVICTED, HELD, QUANTIZED, SINK, kl_divergence, run_policy
from explorer.present.views import ExplorerState
from explorer.ui.tabs import kv_cache
from explorer.viz import cache_lab as lab_figures

TEXT = "The first token of a text is where many heads rest their attention when nothing else fits."


@pytest.fixture(scope="module")
def session(checkpoints):
    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    session = explorer.GenerationSession(loaded, TEXT)
    for _ in range(12):
        session.step()
    return session


def test_the_lab_measures_the_policy_against_the_full_cache_at_every_step(session):
    tokens = list(session.token_ids)
    run = run_policy(session, cp.sinks(2, 30))
    assert session.token_ids == tokens and not session.cache_plan.under_policy  # the session itself is untouched
    assert run.positions == list(range(session.prompt_length - 1, len(tokens)))
    # Computed independently: each step's distributions from a full-cache and a policy session.
    full = explorer.GenerationSession(session.loaded, TEXT)
    other = explorer.GenerationSession(session.loaded, TEXT, cache_policy=cp.sinks(2, 30))
    for i, token in enumerate([None, *session.generated_ids]):
        if token is not None:
            full.force(token), other.force(token)
        assert run.kl[i] == pytest.approx(kl_divergence(full.next_logits(), other.next_logits()), abs=1e-7)
        assert run.same_top[i] == (int(full.next_logits().argmax()) == int(other.next_logits().argmax()))
        assert run.bytes_held[i] == other.cache.self_attn_bytes and run.bytes_full[i] == full.cache.self_attn_bytes
    assert max(run.kl) > 1e-4  # the prompt alone fills more than 32 positions: the policy evicted
    first = run.first_departure
    if first is not None:  # the first step whose top token differs, none before it
        at = run.positions.index(first)
        assert not run.same_top[at] and all(run.same_top[:at])
    assert 0 < run.saving < 1


def test_the_grid_holds_the_budget_with_the_sinks_marked(session):
    run = run_policy(session, cp.sinks(3, 20))
    n = len(session.token_ids)
    assert run.grid.shape == (session.config.n_layers, n)
    assert (run.grid[:, :3] == SINK).all()
    assert np.allclose(run.grid[:, 3:].sum(axis=1), 20)  # per layer: 20 windowed positions, averaged over heads
    assert (run.grid[:, n - 20 :] == HELD).all() and (run.grid[:, 3 : n - 20] == EVICTED).all()
    figure = lab_figures.held_grid_figure(run, session.token_texts(), session.config.n_kv_heads)
    words = figure["data"][0]["customdata"]
    assert "a sink" in words[0][0] and "evicted by sinks 3 + window 20" in words[0][5]
    assert "held by all 2 key/value heads" in words[0][n - 1]


def test_key_norm_differs_by_head_and_the_grid_says_how_many_hold(session):
    run = run_policy(session, cp.key_norm(16))
    kv = session.config.n_kv_heads
    assert np.allclose(run.grid.sum(axis=1), 16)  # 16 held per head, in every layer
    mixed = (run.grid > 0) & (run.grid < 1)
    assert mixed.any()  # some position held by one head and not the other
    layer, position = np.argwhere(mixed)[0]
    figure = lab_figures.held_grid_figure(run, session.token_texts(), kv)
    assert f"held by 1 of {kv} key/value heads" in figure["data"][0]["customdata"][layer][position]


def test_a_quantized_run_marks_the_positions_held_as_integers(session):
    run = run_policy(session, cp.quantized(8, group=8, recent=4))
    n = len(session.token_ids)
    stored = ((n - 4) // 8) * 8  # groups of 8 leave the full-precision tail while it holds 4 + 8
    assert (run.grid[:, :stored] == QUANTIZED).all() and (run.grid[:, stored:] == HELD).all()
    assert run.saving > 0.3 and max(run.kl) < 1e-2


def test_the_lab_counts_a_sliding_layer_as_the_window_it_reads(checkpoints):
    """Gemma 3 (a window of 6 on layers 0 and 2): the full cache's bytes count min(6, length) positions
    there; under sinks 2 + window 10 the sliding layers hold their last 6 positions (the sinks passed),
    the global ones the sinks and the last 10."""
    loaded = explorer.load_model(str(checkpoints["gemma3_text"]), progress=False)
    session = explorer.GenerationSession(loaded, TEXT)
    for _ in range(8):
        ranked = session.next_logits().argsort(descending=True).tolist()
        session.force(next(t for t in ranked[:2] if t != loaded.tokenizer.eos_token_id))
    c, n = loaded.config, len(session.token_ids)
    windows = [c.window_of(i) for i in range(c.n_layers)]
    assert windows == [6, None, 6, None] and n > 12
    per_position = 2 * c.n_kv_heads * c.head_dim * 4  # keys and values, float32
    run = run_policy(session, cp.sinks(2, 10))
    assert run.bytes_full[-1] == per_position * (6 + n + 6 + n)
    assert run.bytes_held[-1] == per_position * (6 + 12 + 6 + 12)
    for layer, window in enumerate(windows):
        held = run.grid[layer]
        if window is None:
            assert (held[:2] == SINK).all() and (held[n - 10 :] == HELD).all() and (held[2 : n - 10] == EVICTED).all()
        else:
            assert (held[n - 6 :] == HELD).all() and (held[: n - 6] == EVICTED).all()
    rows = cp.budget_curve(loaded, list(session.token_ids), budgets=(8,), start=9)
    assert rows[0].bytes == per_position * (6 + n + 6 + n) and all(np.isfinite(r.perplexity) for r in rows)


@pytest.mark.parametrize(
    ("name", "budget", "sinks", "message"),
    [
        ("window", None, 4, "whole number"),
        ("window", 2.5, 4, "whole number"),
        ("window", 0, 4, "from 2 to 1,024"),
        ("window", -5, 4, "from 2 to 1,024"),
        ("window", 5000, 4, "from 2 to 1,024"),
        ("sinks", 8, 8, "sinks must be from 1 to 7"),
        ("sinks", 8, None, "sinks must be a whole number"),
        ("lru", 64, 4, "Unknown policy"),
    ],
)
def test_the_lab_refuses_what_its_controls_cannot_mean(name, budget, sinks, message):
    with pytest.raises(explorer.InputError, match=message):
        kv_cache.chosen_policy(name, budget, sinks, head_dim=64)


def test_the_controls_make_the_policies_they_name():
    assert kv_cache.chosen_policy("sinks", 64.0, 4.0, 64) == cp.sinks(4, 60)
    assert kv_cache.chosen_policy("heavy_hitters", 65, 4, 64) == cp.heavy_hitters(32, 33)
    assert kv_cache.chosen_policy("int4", None, None, 16) == cp.quantized(4, group=16)


def test_the_lab_figures_go_stale_with_a_step(session):
    state = ExplorerState("tiny", session.started_again())
    state.session.step()
    assert kv_cache.figures(state)["lab_grid"] is None
    state.keep("cache_lab", run_policy(state.session, cp.window(16)))  # as the lab's Run does
    assert kv_cache.figures(state)["lab_grid"] is not None
    state.session.step()  # the run covers the tokens before this step: not drawn any more
    assert kv_cache.figures(state)["lab_grid"] is None and kv_cache.figures(state)["lab_divergence"] is None


def test_the_run_summary_goes_with_its_figures_on_a_step(session):
    """Fresh eyes: after a Step the lab's figures went and its summary ("... saved. Over 4 steps
    ...") stayed, a summary of a run no longer shown. It has its own box, drawn with the figures
    (a Step's outputs: FIGURES); the budget curve's sentence keeps #lab-info."""
    state = ExplorerState("tiny", session.started_again())
    state.session.step()
    assert kv_cache.figures(state)["lab_summary"] == ""
    state.keep("cache_lab", run_policy(state.session, cp.window(16)))
    assert "saved" in kv_cache.figures(state)["lab_summary"]
    state.session.step()
    assert kv_cache.figures(state)["lab_summary"] == ""
    assert "lab_summary" in kv_cache.FIGURES and "lab_info" not in kv_cache.FIGURES


def test_the_budget_curve_figure_has_a_line_per_policy():
    rows = [cp.CurveRow("full", "full cache", None, 100, 2.0)]
    for kind, times in (("window", 3), ("sinks", 1.1)):
        rows += [cp.CurveRow(kind, f"{kind} {b}", b, b, 2.0 * times) for b in (16, 32)]
    rows += [cp.CurveRow("int8", "int8", None, 60, 2.02)]
    figure = lab_figures.budget_curve_figure(rows, 256, 33)
    lines = {trace["name"]: trace for trace in figure["data"]}
    assert lines["window"]["y"] == [3.0, 3.0] and lines["sinks"]["y"] == pytest.approx([1.1, 1.1])
    assert lines["int8"]["x"] == [16, 32] and lines["int8"]["line"]["dash"] == "dash"


def test_compare_runs_puts_the_policy_beside_the_full_cache(session):
    """Compare runs' "with the full cache": run A under a policy, run B the full cache choosing its
    own tokens; A's distributions are the policy's (read again under it), not a parallel pass's."""
    from explorer.analysis import compare

    with pytest.raises(explorer.InputError, match="full cache already"):
        compare.branch_of(session, "full-cache")
    a = session.with_cache_policy(cp.sinks(2, 20))
    b = compare.branch_of(a, "full-cache")
    assert not b.cache_plan.under_policy and len(b.generated_ids) == len(a.generated_ids)
    result = compare.compare(a, b)
    again = explorer.GenerationSession(session.loaded, TEXT, cache_policy=cp.sinks(2, 20))
    for step, token in enumerate(a.generated_ids):
        p_a = again.next_token_probabilities()
        assert result.p_a_of_a[step] == pytest.approx(float(p_a[token]), abs=1e-6)
        again.force(token)
    assert result.kl.max() > 1e-4  # the policy evicted: the two runs' predictions differ


def test_the_lab_refuses_a_branch_with_heads_switched_off(session):
    branch = session.with_interventions(explorer.ablate_heads({0: [1]}))
    with pytest.raises(explorer.InputError, match="switches heads or sublayers off"):
        run_policy(branch, cp.window(16))


def test_a_refused_lab_button_leaves_its_reason_beside_the_buttons(checkpoints):
    """The refusal's pop-up fades; the note beside the lab's buttons stays until its next run,
    which clears it (a learner who looked away still sees why nothing ran), or a Step."""
    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    st = ExplorerState(str(checkpoints["llama"]))
    st.start(st.model_name, explorer.GenerationSession(loaded, TEXT))
    run = lambda budget: kv_cache.on_lab_run(st, "sinks", budget, 2, progress=lambda *a, **k: None)  # noqa: E731
    assert run(8) == {"lab_note": "⚠ **Not run.** Step or Generate first: the lab compares the policy with the "
                      "full cache at each step."}  # fmt: skip
    assert kv_cache.figures(st)["lab_note"].startswith("⚠ **Not run.** Step or Generate first")  # (the tab reopened)
    st.session.step()
    assert kv_cache.figures(st)["lab_note"] == ""  # a Step's figures: "Step first" no longer holds
    for _ in range(2):
        st.session.step()
    assert run(0) == {"lab_note": "⚠ **Not run.** The budget must be from 2 to 1,024 (got 0)."}
    out = run(8)
    assert out["lab_note"] == "" and "saved" in out["lab_summary"] and "lab_info" not in out
    unchanged = run(1024)  # a budget past the text: nothing evicted, no divergence
    assert "largest KL 0 nats" in unchanged["lab_summary"]  # (fresh eyes read "0.00e+00 nats")
    assert kv_cache.on_lab_full(st) == {"lab_note": ""}  # nothing to go back from: only the note clears
