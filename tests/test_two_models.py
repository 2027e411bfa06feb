"""The same text read by two models (explorer.compare_models): every figure recomputed here from
full passes (our model with its attention recorded, transformers for the probabilities), with
boundaries found another way (decoding each prefix of the tokens), not from the analysis's code."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis import two_models
from explorer.analysis.roles import INDUCTION_PERIOD
from explorer.model import Record
from tests import builders

TEXT = "The quick brown fox jumps over the lazy dog. Attention is all you need."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Two tiny families of different sizes and vocabularies (so the same text is cut into other
    tokens), and a tiny translator."""
    root = tmp_path_factory.mktemp("two-models")
    folders = {
        "gpt2": builders.tiny_gpt2(root / "gpt2"),  # 3 layers x 4 heads, 320 tokens
        "gemma3": builders.tiny_gemma3(root / "gemma3", vocab_size=280),  # 4 x 4, sliding layers of 6
        "marian": builders.tiny_marian(root / "marian"),
    }
    return {name: explorer.load_model(str(folder)) for name, folder in folders.items()} | {"folders": folders}


@pytest.fixture(scope="module")
def compared(tiny):
    return explorer.compare_models(tiny["gpt2"], tiny["gemma3"], TEXT)


def full_pass(loaded, ids: list[int]) -> tuple[list[np.ndarray], torch.Tensor]:
    """Per layer (heads, T, T), and the next token's log-probabilities (T, vocab), from one pass
    that records attention."""
    with torch.inference_mode():
        out = loaded.model(torch.tensor([ids]), record=Record.of("attention"))
    layers = [out.trace[f"decoder.{i}.self_attn.probs"][0].numpy() for i in range(loaded.config.n_layers)]
    return layers, torch.log_softmax(out.logits[0], dim=-1)


def full_attention(loaded, ids: list[int]) -> list[np.ndarray]:
    return full_pass(loaded, ids)[0]


def expected_scores(loaded, text: str) -> dict[str, np.ndarray]:
    """Each head's shares and entropy written out: a loop over queries 2..T-1."""
    ids = loaded.tokenizer(text)["input_ids"]
    layers = full_attention(loaded, ids)
    shape = (len(layers), layers[0].shape[0])
    previous, first, entropy = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for layer, attention in enumerate(layers):
        for head in range(shape[1]):
            rows = [attention[head, q] for q in range(2, len(ids))]
            previous[layer, head] = np.mean([attention[head, q, q - 1] for q in range(2, len(ids))])
            first[layer, head] = np.mean([row[0] for row in rows])
            entropy[layer, head] = np.mean([-sum(p * math.log(p) for p in row if p > 0) for row in rows])
    return {"previous token": previous, "first token": first, "entropy": entropy}


def expected_induction(loaded, first_id: int) -> np.ndarray:
    """The repeated random sequence of the model's own vocabulary (seed 0, as the census builds it),
    and each head's mean weight on the token after a second-copy token's first occurrence."""
    c = loaded.config
    special = {c.bos_token_id, c.eos_token_id, c.pad_token_id}
    pool = [t for t in range(min(c.vocab_size, 20_000)) if t not in special]
    block = np.random.default_rng(0).choice(pool, size=INDUCTION_PERIOD, replace=False).tolist()
    layers = full_attention(loaded, [first_id, *block, *block])
    p = INDUCTION_PERIOD
    return np.array(
        [[np.mean([a[h, 1 + p + j, 1 + j + 1] for j in range(p - 1)]) for h in range(a.shape[0])] for a in layers]
    )


def ends_by_decoding(tokenizer, ids: list[int]) -> dict[int, int]:
    """Character offset -> the token after which exactly that much of the text has been read:
    the length of each decoded prefix (ASCII text; a start token reads nothing)."""
    ends = {}
    for i in range(len(ids)):
        ends[len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True))] = i
    ends.pop(0, None)
    if ids[0] in tokenizer.all_special_ids:
        ends[0] = 0
    return ends


def reference_logprobs(folder, ids: list[int]) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0], dim=-1)  # (T, vocab)


def expected_agreement(text, tokenizers, logprobs, ids):
    """(boundaries, p_a, p_b, top_a, top_b) written out from each model's own log-probabilities."""
    ends = [ends_by_decoding(t, i) for t, i in zip(tokenizers, ids, strict=True)]
    shared = sorted(set(ends[0]) & set(ends[1]))
    rows = []
    for c, after in itertools.pairwise(shared):
        row = [c]
        for end, lp, seq in zip(ends, logprobs, ids, strict=True):
            row.append(math.exp(sum(float(lp[k, seq[k + 1]]) for k in range(end[c], end[after]))))
        for end, lp, seq, tok in zip(ends, logprobs, ids, tokenizers, strict=True):
            top = int(lp[end[c]].argmax())
            before = tok.decode(seq[: end[c] + 1], skip_special_tokens=True)
            row.append(tok.decode([*seq[: end[c] + 1], top], skip_special_tokens=True)[len(before) :])
        rows.append(row)
    return rows


def test_the_two_tiny_models_cut_the_text_differently(tiny):
    ids = [tiny[name].tokenizer(TEXT)["input_ids"] for name in ("gpt2", "gemma3")]
    assert len(ids[0]) != len(ids[1])


@pytest.mark.parametrize("which", ["a", "b"])
def test_head_scores_equal_a_full_pass(tiny, compared, which):
    census = getattr(compared, which)
    loaded = tiny["gpt2" if which == "a" else "gemma3"]
    expected = expected_scores(loaded, TEXT)
    assert census.scores["previous token"].shape == (loaded.config.n_layers, loaded.config.n_heads)
    np.testing.assert_allclose(census.scores["previous token"], expected["previous token"], atol=1e-5)
    np.testing.assert_allclose(census.scores["first token"], expected["first token"], atol=1e-5)
    np.testing.assert_allclose(census.entropy, expected["entropy"], atol=1e-4)
    first_id = loaded.tokenizer(TEXT)["input_ids"][0]
    np.testing.assert_allclose(census.scores["induction"], expected_induction(loaded, first_id), atol=1e-5)


def test_strongest_heads_are_the_highest_scores_in_order(compared):
    for kind in two_models.KINDS:
        values = compared.b.scores[kind]
        ranked = compared.b.strongest(kind, n=values.size)
        assert [score for *_, score in ranked] == sorted(values.flatten().tolist(), reverse=True)
        assert all(values[layer, head] == score for layer, head, score in ranked)


def test_cache_bytes_from_the_config(tiny, compared):
    gpt2, gemma3 = compared.a, compared.b
    assert gpt2.kv_bytes_per_token == 3 * 4 * 16 * 2 * 4  # layers x kv heads x head size x (k, v) x float32
    assert gpt2.cache_bytes(10) == 10 * gpt2.kv_bytes_per_token
    assert gemma3.kv_bytes_per_token == 4 * 2 * 32 * 2 * 4
    per_layer = 2 * 32 * 2 * 4
    assert gemma3.cache_bytes(5) == 4 * 5 * per_layer  # shorter than the window: every layer holds all
    assert gemma3.cache_bytes(10) == (2 * 6 + 2 * 10) * per_layer  # two sliding layers hold their 6
    assert "2 of 4 layers slide over 6" in gemma3.sliding_note()
    assert gpt2.step_ms > 0 and gemma3.step_ms > 0


def test_agreement_equals_transformers_full_passes(tiny, compared):
    folders = tiny["folders"]
    tokenizers = [tiny[name].tokenizer for name in ("gpt2", "gemma3")]
    ids = [t(TEXT)["input_ids"] for t in tokenizers]
    logprobs = [reference_logprobs(folders[name], i) for name, i in zip(("gpt2", "gemma3"), ids, strict=True)]
    rows = expected_agreement(TEXT, tokenizers, logprobs, ids)
    got = compared.agreement
    assert got.boundaries == [row[0] for row in rows]
    assert len(got.boundaries) >= 5
    np.testing.assert_allclose(got.p_a, [row[1] for row in rows], rtol=1e-3, atol=1e-7)
    np.testing.assert_allclose(got.p_b, [row[2] for row in rows], rtol=1e-3, atol=1e-7)
    for got_tops, column in ((got.top_a, 3), (got.top_b, 4)):  # part of a character: its bytes, as "<c0>"
        for top, row in zip(got_tops, rows, strict=True):
            assert top == row[column] if "\ufffd" not in row[column] else top.startswith("<")
    ends = [*got.boundaries[1:], len(TEXT)]
    assert got.segments == [TEXT[c:after] for c, after in zip(got.boundaries, ends, strict=True)]


def test_divergence_is_the_symmetric_kl_of_the_two_yes_no_predictions():
    p, q = np.array([0.9, 0.2, 0.5]), np.array([0.1, 0.2, 0.25])

    def kl(a, b):
        return a * math.log(a / b) + (1 - a) * math.log((1 - a) / (1 - b))

    by_hand = [kl(a, b) + kl(b, a) for a, b in zip(p, q, strict=True)]
    np.testing.assert_allclose(two_models.jeffreys(p, q), by_hand, rtol=1e-9)
    assert two_models.jeffreys(np.array([0.3]), np.array([0.3]))[0] == 0


def test_top_tokens_agree_when_one_decoded_string_begins_the_other():
    assert two_models.top_agree(" Par", " Paris") and two_models.top_agree(" Paris", " Paris")
    assert not two_models.top_agree(" Paris", " London") and not two_models.top_agree("", " Paris")


def test_a_model_beside_itself_agrees_everywhere(tiny):
    same = explorer.compare_models(tiny["gpt2"], tiny["gpt2"], TEXT)
    assert all(same.agreement.agree) and np.all(same.agreement.divergence < 1e-6)


def test_the_translator_takes_part_on_its_decoder_side(tiny):
    result = explorer.compare_models(tiny["gpt2"], tiny["marian"], "twenty-one and three hundred")
    assert result.agreement is None and "translator" in result.agreement_note
    marian = tiny["marian"].config
    assert result.b.scores["induction"].shape == (marian.n_layers, marian.n_heads)
    assert len(result.b.tokens) > 5  # its decoder's own translation, start token first


def test_a_text_too_short_is_refused(tiny):
    with pytest.raises(explorer.InputError, match="longer text"):
        explorer.compare_models(tiny["gpt2"], tiny["gemma3"], "The")


@pytest.fixture(scope="module")
def real_pair(smollm2, gemma3):
    """SmolLM2 and Gemma 3 270M, the suite's one copy of each (conftest.py)."""
    return smollm2, gemma3


@pytest.mark.slow
def test_smollm2_beside_gemma3(real_pair):
    text = "The capital of France is Paris. The capital of Italy is Rome."
    result = explorer.compare_models(*real_pair, text)
    tokenizers = [loaded.tokenizer for loaded in real_pair]
    ids = [t(text)["input_ids"] for t in tokenizers]
    logprobs = []
    for census, loaded, seq in zip((result.a, result.b), real_pair, ids, strict=True):
        layers, lp = full_pass(loaded, seq)
        logprobs.append(lp)
        n = len(seq)
        previous = [[a[h, range(2, n), range(1, n - 1)].mean() for h in range(len(a))] for a in layers]
        np.testing.assert_allclose(census.scores["previous token"], previous, atol=1e-4)
        first = [[a[h, 2:, 0].mean() for h in range(len(a))] for a in layers]
        np.testing.assert_allclose(census.scores["first token"], first, atol=1e-4)
    assert result.b.config.n_kv_heads == 1 and result.b.kv_bytes_per_token == 18 * 1 * 256 * 2 * 4
    assert result.a.kv_bytes_per_token == 30 * 3 * 64 * 2 * 4
    rows = expected_agreement(text, tokenizers, logprobs, ids)
    assert result.agreement.boundaries == [row[0] for row in rows]
    np.testing.assert_allclose(result.agreement.p_a, [row[1] for row in rows], rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(result.agreement.p_b, [row[2] for row in rows], rtol=1e-3, atol=1e-6)
    assert result.agreement.agreement_rate > 0.5  # two real models mostly expect the same next word here


def test_the_tab_lists_each_kinds_strongest_heads_and_a_row_opens_its_head(compared):
    from explorer.present import two_models as shown

    rows = shown.head_rows(compared.b)
    assert len(rows) == 3 * shown.PER_KIND
    for row_index, (kind, rank, name, score) in enumerate(rows):
        layer, head, value = compared.b.strongest(two_models.KINDS[row_index // shown.PER_KIND], rank)[-1]
        assert shown.SHORT_KINDS[two_models.KINDS[row_index // shown.PER_KIND]] == kind
        assert (name, score) == (f"L{layer}.H{head}", f"{value:.2f}")
        assert shown.head_at(compared.b, row_index) == (layer, head)
    assert shown.head_at(compared.b, len(rows)) is None
    figure = shown.agreement_figure(compared)
    assert [trace["y"] for trace in figure["data"][:2]] == [list(compared.agreement.p_a), list(compared.agreement.p_b)]


def test_unloading_a_model_no_session_uses_frees_it_and_a_later_request_loads_it_again(tiny):
    from explorer.present import model_store

    name = str(tiny["folders"]["gpt2"])
    model_store.get_model(name, progress=False)
    assert model_store.is_loaded(name) and model_store.unload_model(name).freed
    assert not model_store.is_loaded(name) and not model_store.unload_model(name).was_loaded
    assert model_store.get_model(name, progress=False).name == "gpt2" and model_store.is_loaded(name)
    model_store.unload_model(name)


def test_a_character_split_over_two_tokens_is_no_boundary():
    """SmolLM2's offsets for "🙂 ok" after a space: the emoji's two byte pieces share its end."""
    offsets = [(0, 0), (0, 1), (1, 3), (2, 3), (3, 6)]  # a start token, "a", two pieces of one character, " ok"
    ends = two_models.token_boundaries([7, 10, 11, 12, 13], offsets, special={7})
    assert ends == {0: 0, 1: 1, 3: 3, 6: 4}  # none after the character's first piece


def test_the_page_model_beside_itself_is_refused_with_what_to_do(monkeypatch):
    """Fresh eyes: SmolLM2 beside SmolLM2 read "agree at 100%" with nothing saying why."""
    import gradio as gr

    from explorer.present import model_store
    from explorer.present.views import ExplorerState
    from explorer.ui.tabs import two_models

    loaded = model_store.get_model("en-de-numbers", progress=False)
    st = ExplorerState("en-de-numbers", session=explorer.GenerationSession(loaded, "twenty-one"))
    warned = []
    monkeypatch.setattr(gr, "Warning", warned.append)
    assert two_models.on_read_both(st, "en-de-numbers") == gr.skip() and st.two_models is None
    assert warned and "already shows en-de-numbers: choose another model" in warned[0]


def test_the_tab_says_which_text_both_read_and_what_to_do_when_the_box_holds_another(tiny, compared):
    """Fresh eyes: a learner who emptied or changed the box got the old text's census without a word."""
    from explorer.present import two_models as shown

    said = shown.text_read(compared, TEXT, TEXT)
    assert said.startswith("**Read by both**: “The quick brown fox jumps over the lazy dog\\. ") and "box" not in said
    assert "**The box is empty**" in shown.text_read(compared, TEXT, "  ")
    assert "**The box holds another text, not read yet**: press **Step**" in shown.text_read(compared, TEXT, "A cat")
    assert "**The page now shows another text**" in shown.text_read(compared, "A cat", "A cat")
    assert shown.quoted("*a*\n[b](c)") == "“\\*a\\*⏎\\[b\\]\\(c\\)”"  # typed signs stay text, not Markdown
    assert shown.quoted("x" * 200) == "“" + "x" * shown.QUOTED_CHARS + "…”"


def test_the_second_models_table_says_the_generated_tokens_stay_behind_before_the_click(tiny, compared):
    """Fresh eyes: a click on the second model's head kept the prompt and silently lost the tokens generated."""
    from explorer.present import two_models as shown
    from explorer.present.views import ExplorerState
    from explorer.ui.tabs import two_models as tab

    st = ExplorerState(compared.a.name, session=explorer.GenerationSession(tiny["gpt2"], TEXT))
    st.two_models = compared
    assert "left behind" not in tab.figures(st)["two_models_heads_b"].label
    for _ in range(3):
        st.session.step()
    shown_now = tab.figures(st, box_text="")
    assert shown_now["two_models_heads_b"].label.endswith("; the 3 tokens generated here are left behind)")
    assert "left behind" not in shown_now["two_models_heads_a"].label  # a head of the page's model keeps them
    assert "**The box is empty**" in shown_now["two_models_info"]
    assert shown.left_behind(1, "with m") == "the token generated with m is left behind"


def test_the_agreement_chart_keeps_its_title_clear_of_the_tool_bar(compared):
    """Fresh eyes: on a phone, Plotly's mode bar covered the chart's title (browser: its parts' boxes)."""
    from explorer.present import two_models as shown
    from explorer.viz import agreement

    layout = shown.agreement_figure(compared)["layout"]
    title = layout["title"]
    assert (title["yref"], title["y"], title["yanchor"]) == ("container", 1, "top")
    assert title["pad"]["t"] == agreement.TOP_BAR_PX and "<br>" in title["text"]  # two short lines on a phone
    assert layout["margin"]["t"] > agreement.TOP_BAR_PX + 2 * 18 + 3 * 20  # the title, then a legend of 3 lines
    assert {"select2d", "lasso2d"} <= set(layout["modebar"]["remove"])


def test_a_click_on_the_second_models_head_says_what_it_leaves_and_keeps_a_typed_box(tiny, compared, monkeypatch):
    """The switch to the second model: the census's text on the page, the tokens generated said left
    behind in a note that stays, and a box holding another typed text left as the learner typed it."""
    import gradio as gr

    from explorer.present import model_store
    from explorer.present.views import ExplorerState
    from explorer.ui.tabs import two_models as tab

    by_name = {compared.a.name: tiny["gpt2"], compared.b.name: tiny["gemma3"]}
    monkeypatch.setattr(model_store, "get_model", lambda name, progress=True: by_name[name])
    said = []
    monkeypatch.setattr(gr, "Info", lambda message, duration=10: said.append((message, duration)))
    st = ExplorerState(compared.a.name, session=explorer.GenerationSession(tiny["gpt2"], TEXT))
    st.two_models = compared
    st.session.step()
    click = type("Click", (), {"index": [0, 2]})()
    settings = ["Another text, typed", False, True, 1.0, 0, 1.0, 0]  # render.SETTINGS, in order
    shown = tab.head_opener("b")(st, *settings, click)
    assert st.model_name == compared.b.name and st.session.text == TEXT and not st.session.generated_ids
    layer, head, _ = compared.b.strongest("previous token", 1)[0]  # row 0: the strongest previous-token head
    assert (st.layer, st.head) == (layer, str(head))
    assert shown["text"].value is None  # the box keeps what was typed
    message, duration = said[0]
    assert "The token generated with" in message and "is left behind" in message and "The box keeps" in message
    assert duration is None  # stays until closed
