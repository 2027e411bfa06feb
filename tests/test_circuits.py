"""QK and OV circuits (explorer/analysis/circuits): every decomposition sums to what the model computed."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.analysis.circuits import why_row

TOL = 1e-4  # relative, in float32
TEXT = "The quick brown fox: def add(a, b)"
FAMILIES = ["gpt2", "llama", "qwen2", "qwen3", "mistral", "phi3", "opt", "gpt_neox", "gemma3_text"]
TRANSLATORS = ["marian", "bart", "mbart", "t5", "flan_t5"]


def stepped(loaded, use_cache: bool, steps: int = 3) -> explorer.GenerationSession:
    text = "twenty-one on March 3" if loaded.config.is_encoder_decoder else TEXT
    session = explorer.GenerationSession(loaded, text, use_cache=use_cache)
    for _ in range(steps):
        session.step()
    return session


def readable_keys(config, layer: int, query: int) -> list[int]:
    window = config.window_of(layer)
    return list(range(0 if window is None else max(0, query - window + 1), query + 1))


def assert_rows_sum_to_scores(cells) -> None:
    """Each cell's pairs sum to the model's own score, within TOL of the row's largest score."""
    scores = np.array([cell.score for cell in cells])
    sums = np.array([cell.pairs.sum() for cell in cells])
    assert np.abs(sums - scores).max() <= TOL * max(np.abs(scores).max(), 1e-3), (sums, scores)
    for cell in cells:  # the sides are the pair matrix's rows and columns
        assert sum(cell.query_components.values()) == pytest.approx(cell.pairs.sum(), rel=1e-9, abs=1e-9)
        assert sum(cell.key_components.values()) == pytest.approx(cell.pairs.sum(), rel=1e-9, abs=1e-9)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no-cache"])
@pytest.mark.parametrize("family", FAMILIES + TRANSLATORS)
def test_score_is_the_sum_of_its_pairs_on_every_family(checkpoints, family, use_cache):
    loaded = explorer.load_model(str(checkpoints[family]))
    config = loaded.config
    session = stepped(loaded, use_cache)
    query = len(session.token_ids) - 1
    for layer in range(config.n_layers):
        for head in (0, config.n_heads - 1):
            keys = readable_keys(config, layer, query)
            cells = why_row(session, layer, head, query, keys)
            assert_rows_sum_to_scores(cells)
            # the scores, through the softmax, are the session's own heatmap row (cache on or off)
            weights = softmax(np.array([cell.pairs.sum() for cell in cells]))
            assert np.abs(weights - session.self_attention(layer)[head, query, keys]).max() <= TOL


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no-cache"])
@pytest.mark.parametrize("family", TRANSLATORS)
def test_cross_attention_keys_are_the_encoder_memorys_components(checkpoints, family, use_cache):
    loaded = explorer.load_model(str(checkpoints[family]))
    config = loaded.config
    session = stepped(loaded, use_cache)
    query, keys = len(session.token_ids) - 1, list(range(len(session.source_ids)))
    for layer in range(config.n_layers):
        cells = why_row(session, layer, 1, query, keys, attention="cross")
        assert_rows_sum_to_scores(cells)
        assert all(name.startswith("enc.") for name in cells[0].key_names if name != "k bias")
        assert f"enc.L{config.n_encoder_layers - 1}.H0" in cells[0].key_names
        assert f"L{layer}.H0" in cells[0].query_names  # this layer's own self-attention came first
        weights = softmax(np.array([cell.pairs.sum() for cell in cells]))
        assert np.abs(weights - session.cross_attention(layer)[1, query]).max() <= TOL


def test_components_are_named_by_what_wrote_them(checkpoints):
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    session = stepped(loaded, use_cache=True)
    cell = explorer.why_attends(session, 2, 1, 5, 3)
    heads = [f"L{layer}.H{head}" for layer in range(2) for head in range(loaded.config.n_heads)]
    assert set(cell.query_names) == {"embed", "bias", "q bias", "L0.mlp", "L1.mlp", *heads}
    assert set(cell.key_names) == {"embed", "bias", "k bias", "L0.mlp", "L1.mlp", *heads}
    assert cell.pairs.shape == (len(cell.query_names), len(cell.key_names))
    assert "Layer 2 head 1 scores" in cell.summary()
    first = explorer.why_attends(explorer.GenerationSession(loaded, TEXT), 0, 0, 1, 0)
    assert set(first.query_names) == {"embed", "bias", "q bias"}  # the embedding, the LayerNorm beta


def test_cells_the_head_cannot_read_are_refused(checkpoints):
    loaded = explorer.load_model(str(checkpoints["gemma3_text"]))
    session = stepped(loaded, use_cache=True, steps=8)
    query = len(session.token_ids) - 1
    with pytest.raises(explorer.InputError, match="reads keys"):
        explorer.why_attends(session, 0, 0, 3, 4)  # the future
    sliding = next(layer for layer in range(loaded.config.n_layers) if loaded.config.window_of(layer))
    with pytest.raises(explorer.InputError, match="reads keys"):
        explorer.why_attends(session, sliding, 0, query, 0)  # past the window
    with pytest.raises(explorer.InputError, match="layer"):
        explorer.why_attends(session, 99, 0, query, 0)
    with pytest.raises(explorer.InputError, match="cross-attention"):
        explorer.why_attends(session, 0, 0, query, 0, attention="cross")


def test_smollm2_scores_are_the_sum_of_their_pairs(smollm2):
    session = explorer.GenerationSession(smollm2, "The cat sat on the mat. The cat sat on the", use_cache=True)
    session.step()
    query = len(session.token_ids) - 1
    for layer in (0, 5, 17, 29):
        cells = why_row(session, layer, 3, query, list(range(query + 1)))
        assert_rows_sum_to_scores(cells)
        weights = softmax(np.array([cell.pairs.sum() for cell in cells]))
        assert np.abs(weights - session.self_attention(layer)[3, query]).max() <= TOL


def test_each_sides_bars_add_up_to_the_score_the_others_summed(smollm2):
    """The page shows a side's 8 largest components of a SmolLM2 cell (of ~90 on the key side); the
    rest are one bar, "the other N", so that each side's bars add up to the score."""
    from explorer.present.circuits import SHOWN, cell_figure, explained

    session = explorer.GenerationSession(smollm2, "The cat sat on the mat. The cat sat on the", use_cache=True)
    query = len(session.token_ids) - 1
    cell = explained(session, 17, 3, query, None)
    query_bars, key_bars = cell_figure(cell)["data"][:2]
    for bars, components in ((query_bars, cell.query_components), (key_bars, cell.key_components)):
        assert len(components) > SHOWN + 1
        assert bars["y"][0] == f"the other {len(components) - SHOWN}, summed"  # (drawn last: the largest on top)
        assert abs(sum(bars["x"]) - cell.score) <= TOL * max(1.0, abs(cell.score))
        shown = dict(zip(bars["y"][1:], bars["x"][1:], strict=True))
        assert shown == dict(cell.largest(components, SHOWN))


def assert_carried_sums(carried) -> None:
    """The keys' vectors sum to the head's output, their logit effects to its direct effect."""
    scale = max(np.abs(carried.output).max(), 1e-6)
    assert np.abs(carried.vectors.sum(0) - carried.output).max() <= TOL * scale
    effects_scale = max(np.abs(carried.logit_effects).max(), abs(carried.direct_effect), 1e-6)
    assert abs(carried.logit_effects.sum() - carried.direct_effect) <= TOL * effects_scale
    assert np.allclose(carried.norms, np.linalg.norm(carried.vectors, axis=-1))


@pytest.mark.parametrize("family", FAMILIES + TRANSLATORS)
def test_what_a_head_carries_sums_to_its_output_and_direct_effect(checkpoints, family):
    loaded = explorer.load_model(str(checkpoints[family]))
    config = loaded.config
    session = stepped(loaded, use_cache=True)
    for query in (len(session.token_ids) - 2, len(session.token_ids) - 1):
        for layer in range(config.n_layers):
            head = config.n_heads - 1  # the last head: the last group of a grouped-query model
            carried = explorer.what_it_carries(session, layer, head, query)
            assert_carried_sums(carried)
            weights = session.self_attention(layer)[head, query]
            assert np.abs(carried.weights - weights[carried.keys]).max() <= TOL
            if config.is_encoder_decoder:
                assert_carried_sums(explorer.what_it_carries(session, layer, head, query, attention="cross"))
    # the direct effects of every head, every MLP, the embedding and the biases make the logit
    from explorer.analysis.circuits.ov import _direct

    query = len(session.token_ids) - 2
    carried = explorer.what_it_carries(session, 0, 0, query, token=7)
    _, parts = _direct(session, query)
    logit = session.full_pass().logits[0, query, 7]
    bias = 0.0 if loaded.model.final_logits_bias is None else float(loaded.model.final_logits_bias[7])
    direct = (parts @ loaded.model.lm_head.weight[7]).sum() + bias
    assert float(direct) == pytest.approx(float(logit), abs=TOL * max(abs(float(logit)), 1.0))
    assert carried.token_id == 7 and "carries most from" in carried.summary()


def test_weight_times_what_is_carried_colours_the_heatmap(checkpoints):
    from explorer.analysis.circuits import carried_norms

    loaded = explorer.load_model(str(checkpoints["llama"]))  # grouped-query
    session = stepped(loaded, use_cache=True)
    query = len(session.token_ids) - 1
    norms = carried_norms(session, 1, 3)  # (queries, keys)
    assert norms.shape == (query + 1, query + 1)
    assert np.allclose(norms[query, : query + 1], explorer.what_it_carries(session, 1, 3, query).norms, atol=1e-6)
    assert (np.triu(norms, 1) == 0).all()  # the future carries nothing


@pytest.mark.parametrize(("family", "attention"), [("llama", "self"), ("gpt_neox", "self"), ("marian", "cross")])
def test_composition_is_the_attention_weighted_share_of_each_side(checkpoints, family, attention):
    loaded = explorer.load_model(str(checkpoints[family]))
    session = stepped(loaded, use_cache=True)
    layer, head = loaded.config.n_layers - 1, 1
    found = explorer.composition(session, layer, head, attention)
    for kind in ("k", "q", "v"):
        assert sum(getattr(found, kind).values()) == pytest.approx(1.0, abs=1e-6)
    assert all(is_head_name(name) for name, _ in found.heads("k"))
    # K- and Q-composition from why_attends, cell by cell: Σ_ij α_ij |the component's share of the score|
    n, sources = len(session.token_ids), len(session.source_ids)
    key_shares, query_shares = {}, {}
    for query in range(n):
        keys = list(range(sources)) if attention == "cross" else list(range(query + 1))
        weights = (session.cross_attention(layer) if attention == "cross" else session.self_attention(layer))[
            head, query
        ]
        for cell in why_row(session, layer, head, query, keys, attention):
            for shares, parts in ((key_shares, cell.key_components), (query_shares, cell.query_components)):
                for name, value in parts.items():
                    shares[name] = shares.get(name, 0.0) + weights[cell.key] * abs(value)
    for expected, got in ((key_shares, found.k), (query_shares, found.q)):
        total = sum(expected.values())
        assert max(abs(expected[name] / total - got[name]) for name in got) <= 1e-4
    assert "keys made mostly by" in found.summary()


def is_head_name(name: str) -> bool:
    from explorer.analysis.circuits.composition import HEAD

    return HEAD.match(name) is not None


def test_smollm2s_induction_head_finds_the_copy_through_a_previous_token_head(smollm2):
    """Issue 43, item 4, as SmolLM2 does it: on 24 random single-token words repeated, the strongest
    induction head's score at the copy position comes on the key side mostly from a previous-token
    head of an earlier layer, and switching the key side's top heads off stops the copying."""
    from explorer.analysis import roles
    from explorer.lessons import strongest_induction_heads

    tokenizer = smollm2.tokenizer
    pieces = tokenizer.convert_ids_to_tokens(list(range(2000, 20000)))
    words = [p[1:] for p in pieces if p.startswith("Ġ") and p[1:].isalpha() and p[1:].islower() and len(p) > 4]
    block = list(np.random.default_rng(0).choice(words, 24, replace=False))
    session = explorer.GenerationSession(smollm2, "Words: " + " ".join(block + block), use_cache=False)
    ids, period = session.token_ids, 24
    start = len(ids) - 2 * period
    assert ids[start : start + period] == ids[start + period :]
    layer, head = strongest_induction_heads(session, 1)[0]
    copies = range(start + period, len(ids) - 1)  # a query in the second copy reads the key after its first
    key_side: dict[str, float] = {}
    for query in copies:
        for name, value in explorer.why_attends(session, layer, head, query, query - period + 1).key_components.items():
            key_side[name] = key_side.get(name, 0.0) + value / len(copies)
    heads = [name for name in sorted(key_side, key=lambda n: -key_side[n]) if is_head_name(name)][:3]
    top_layer, top_head = (int(part[1:]) for part in heads[0].split("."))
    previous = roles.previous_token_score(session.self_attention(top_layer))[top_head]
    assert top_layer < layer and previous > 0.5, (heads, previous)

    def copying(switched) -> float:
        spec: dict[int, list[int]] = {}
        for name in switched:
            at, which = (int(part[1:]) for part in name.split("."))
            spec.setdefault(at, []).append(which)
        logits = session.run_decoder(session.ids_tensor(ids), interventions=explorer.ablate_heads(spec)).logits[0]
        probabilities = logits.float().softmax(-1)
        return float(np.mean([probabilities[q, ids[q + 1]].item() for q in copies]))

    intact, without = copying([]), copying(heads)
    assert without < 0.2 * intact, (heads, intact, without)  # SmolLM2: 0.27 -> 0.002 (docs/python-api.md)


def test_both_sides_bars_share_one_scale():
    """Fresh eyes: each side had its own x-axis, so +1.07 was drawn as long as +3.85. Both sides'
    axes span every bar of either side (the grey rest too) and zero."""
    from explorer.viz.circuits import why_figure

    figure = why_figure([("embed", 1.07)], [("L1.mlp", 3.85), ("L0.H2", -0.5)], np.ones((1, 2)), "t",
                        (("the other 3, summed", -1.2), None))  # fmt: skip
    query_range, key_range = figure["layout"]["xaxis1"]["range"], figure["layout"]["xaxis2"]["range"]
    assert query_range == key_range and query_range[0] < -1.2 and query_range[1] > 3.85
