"""The translator's data and training script (a tiny run, so that it cannot rot)."""

from __future__ import annotations

import json

import pytest
import torch

from explorer.train.data import CATEGORIES, build_dataset, split_of


def test_split_is_by_value_across_categories():
    """A held-out value is held out in every form: 24 as "24", "twenty-four" or "twenty-fourth"
    is one value, and the templates of new forms are never trained on."""
    from explorer.train.forms import NEW_FORMS

    data = build_dataset(seed=0, scale=0.02)
    values = {name: {p.value for p in pairs} for name, pairs in data.items()}
    assert not values["train"] & values["test"]
    assert not values["train"] & values["validation"]
    for name in ("train", "validation", "test"):
        assert all(split_of(p.value) == name for p in data[name])
    assert all(p.form in NEW_FORMS for p in data["new_forms"])
    assert not {p.form for p in data["train"]} & set(NEW_FORMS)
    english = [p.english for pairs in data.values() for p in pairs]
    assert len(english) == len(set(english))  # deduplicated


def test_one_value_has_one_split_in_every_category():
    held_out = next(str(n) for n in range(101, 10_000) if split_of(str(n)) == "test")
    assert all(split_of(str(n)) == "train" for n in range(-100, 101))  # small numbers: vocabulary
    assert split_of("word:Monday") == "train" and split_of("07:00:00") == "train"  # a whole hour
    assert split_of(held_out) == "test"


def test_pairs_are_library_renderings():
    data = build_dataset(seed=0, scale=0.05)
    pairs = [p for split in data.values() for p in split]
    assert {p.category for p in pairs} == set(CATEGORIES)
    from num2words import num2words

    cardinals = [p for p in pairs if p.category == "cardinal" and not p.value.startswith("word:")]
    assert len(cardinals) > 50
    for p in cardinals:  # a typed final period is carried over to the German
        assert p.german.removesuffix(".") == num2words(int(p.value), lang="de")


@pytest.mark.slow  # the whole script, data to metrics
def test_the_training_script_runs_end_to_end_on_a_tiny_configuration(tmp_path):
    """``scripts/train_translator.py`` itself, as the model card's command runs it, only smaller."""
    import subprocess
    import sys

    from transformers import MarianMTModel

    import explorer
    from explorer.loading.registry import ASSETS

    out = tmp_path / "tiny-translator"
    tiny = {
        "out": out, "data-scale": 0.01, "vocab-size": 200, "d-model": 32, "layers": 2, "heads": 4, "d-ff": 64,
        "steps": 15, "batch-tokens": 600, "warmup": 5, "eval-limit": 30, "seed": 3,
    }  # fmt: skip
    arguments = [f"--{name}={value}" for name, value in tiny.items()]

    run = subprocess.run(
        [sys.executable, "scripts/train_translator.py", *arguments], cwd=ASSETS.parent, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "exact_match" in run.stdout  # the summary it prints
    for name in ("config.json", "model.safetensors", "source.spm", "vocab.json", "README.md", "known_words.json"):
        assert (out / name).is_file()
    saved = json.loads((out / "metrics.json").read_text())
    assert set(saved) >= {"exact_match", "exact_match_by_category", "chrf", "alignment_by_layer", "data_sizes",
                          "new_forms", "small_numbers", "first_inputs", "parameters", "vocabulary"}  # fmt: skip
    assert saved["config"]["seed"] == 3 and saved["config"]["steps"] == 15
    assert len(saved["alignment_by_layer"]) == 2
    assert "Reproduce" in (out / "README.md").read_text()

    # --evaluate-only recomputes every figure from the weights, with the settings it was trained with
    (out / "README.md").unlink()
    again = subprocess.run(
        [sys.executable, "scripts/train_translator.py", "--evaluate-only", f"--out={out}"], cwd=ASSETS.parent,
        capture_output=True, text=True,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    recomputed = json.loads((out / "metrics.json").read_text())
    for figure in ("exact_match", "exact_match_by_category", "chrf", "alignment_by_layer", "small_numbers"):
        assert recomputed[figure] == saved[figure], figure
    assert recomputed["train_minutes"] == saved["train_minutes"] and "Reproduce" in (out / "README.md").read_text()

    reference = MarianMTModel.from_pretrained(out, attn_implementation="eager").eval()
    loaded = explorer.load_model(str(out))
    src = torch.tensor([loaded.tokenizer("twenty-one")["input_ids"]])
    tgt = torch.tensor([[loaded.config.decoder_start_token_id, 5, 7]])
    with torch.no_grad():
        expected = reference(input_ids=src, decoder_input_ids=tgt).logits
        memory, _ = loaded.model.encode(src)
        ours = loaded.model(tgt, memory).logits
    assert (ours - expected).abs().max() <= 1e-4


def test_learning_rate_warms_up_then_cools_down_to_zero():
    from explorer.train.translator import TrainConfig, learning_rate, noam_lr

    config = TrainConfig(steps=1000, warmup=100, cooldown=0.3)
    rates = [learning_rate(step, config) for step in range(1, 1001)]
    peak = max(range(1000), key=rates.__getitem__) + 1
    assert peak == 100  # the 2017 warm-up ends at its peak
    assert rates[499] == noam_lr(500, config.d_model, 100, 1.0)  # before the cool-down: the 2017 schedule
    assert rates[700] < noam_lr(701, config.d_model, 100, 1.0)  # the cool-down has begun (step 701 of 1000)
    assert all(a >= b for a, b in zip(rates[peak:], rates[peak + 1 :], strict=False))  # never rises again
    assert rates[-1] == 0.0


def test_every_time_is_typed_three_ways():
    import random

    from explorer.train.data import times

    pairs = times(random.Random(0))
    quarter_to_four = [p for p in pairs if p.value == "15:45:00"]
    assert {(p.english, p.german) for p in quarter_to_four} == {
        ("3:45 PM", "15:45"), ("3:45pm", "15:45"), ("at 3:45 PM", "um 15:45"),
    }  # fmt: skip


def test_the_vocabulary_is_repeated_in_training_and_nothing_else():
    from explorer.train.data import Pair
    from explorer.train.translator import with_vocabulary_repeated

    pairs = [
        Pair("twenty-one", "einundzwanzig", "cardinal", "21", "small-words"),
        Pair("twenty-first", "einundzwanzigste", "ordinal", "21", "small-ordinal-words"),
        Pair("21", "21", "number", "21", "small-digits"),
        Pair("3-5 km", "3-5 km", "unit", "5", "unit-range"),  # a small value, but not a word to learn
        Pair("three hundred", "dreihundert", "cardinal", "300"),
    ]
    repeated = [p.english for p in with_vocabulary_repeated(pairs, 3)]
    assert [repeated.count(p.english) for p in pairs] == [3, 3, 3, 1, 1]
    assert with_vocabulary_repeated(pairs, 1) == pairs


def test_prefixed_numeric_dates_and_clock_times_are_trained_so_that_on_and_at_can_be_new():
    import random

    from explorer.train.forms import NEW_FORMS, date_forms, time_forms

    rng = random.Random(0)
    forms = {p.form for p in date_forms(rng) + time_forms(rng)}
    assert {"date-prefixed-numeric", "time-prefixed-24h"} <= forms
    assert {"date-on-numeric", "time-at-24h"} <= set(NEW_FORMS)


def test_alignment_accuracy_scores_constructed_attention():
    """Attention built by hand: every German piece reads the English word it translates (100%),
    every piece reads the first source piece (only what that piece happens to be), or the
    tens word for the units piece and the other way round (0%)."""
    import numpy as np
    from transformers import MarianTokenizer

    from explorer.loading.registry import ASSETS
    from explorer.train.alignment import alignment_accuracy, part_of, piece_spans, two_digit_cases

    tokenizer = MarianTokenizer.from_pretrained(ASSETS / "en-de-numbers")
    cases = {c.english: c for c in two_digit_cases()}
    assert len(cases) == 72

    def attention(rule):
        def cross_attention_of(source, target):
            case = next(c for c in cases.values() if tokenizer(c.english)["input_ids"] == source)
            src_parts = [part_of(s, case.english_spans) for s in piece_spans(tokenizer, source)]
            tgt_parts = [part_of(s, case.german_spans) for s in piece_spans(tokenizer, target)]
            probs = np.full((3, 2, len(target), len(source)), 0.01)  # (layers, heads, T, S)
            for t, part in enumerate(tgt_parts):
                wanted = rule(part)  # a part's name, or None: the first source piece
                columns = [i for i, p in enumerate(src_parts) if wanted is not None and p == wanted] or [0]
                probs[:, :, t, columns[0]] = 1.0
            return probs

        return cross_attention_of

    swap = {"units": "tens", "tens": "units"}
    assert alignment_accuracy(attention(lambda part: part), tokenizer, 3) == [1.0, 1.0, 1.0]
    assert alignment_accuracy(attention(lambda part: swap.get(part)), tokenizer, 3) == [0.0, 0.0, 0.0]
    # Reading the first source piece is right only for the tens ("twenty" leads the English):
    # the tens and units pieces are scored equally often, so half of them.
    assert alignment_accuracy(attention(lambda part: None), tokenizer, 3) == pytest.approx([0.5] * 3)


def test_a_vocabulary_pair_with_a_rare_piece_is_repeated_until_the_piece_is_common():
    from explorer.train.data import Pair
    from explorer.train.translator import with_vocabulary_repeated

    pairs = [
        Pair("zero", "null", "cardinal", "0", "small-words"),  # its pieces occur nowhere else
        Pair("twenty", "zwanzig", "cardinal", "20", "small-words"),
        Pair("twenty-one", "einundzwanzig", "cardinal", "21", "small-words"),
        Pair("twenty-two", "zweiundzwanzig", "cardinal", "22", "small-words"),
        Pair("twenty thousand", "zwanzigtausend", "cardinal", "20000"),
    ]
    zero, twenty = [7], [8]  # piece ids: "zero"/"null" once, "twenty"/"zwanzig" in four pairs
    encoded = [(zero, zero), (twenty, twenty), ([*twenty, 9], [*twenty, 9]), ([*twenty, 10], [*twenty, 10]),
               ([*twenty, 11], [*twenty, 11])]  # fmt: skip
    repeated = with_vocabulary_repeated(pairs, 2, encoded, min_piece_count=12)
    counts = [repeated.count(p) for p in pairs]
    # zero: its piece seen once -> 12 copies; twenty's pieces 4 times -> 3; "twenty-one": its own
    # pieces 9/10 once -> 12; the non-vocabulary pair stays once.
    assert counts == [12, 3, 12, 12, 1]
    assert repeated[: len(pairs) + 3 * 1] == pairs + pairs[:3]  # the plain repeat's order comes first


def test_regrouping_spreads_the_copies_of_a_repeated_pair_over_the_batches():
    import random

    from explorer.train.translator import batches

    examples = [([1, 2], [3, 4])] * 200 + [([9, 2], [8, 4])] * 20  # 20 copies of one pair, all one length
    copies = set(range(200, 220))

    def batches_holding_a_copy(regroup: bool) -> int:
        stream = batches(examples, batch_tokens=40, rng=random.Random(0), regroup=regroup)  # 20 a batch
        return sum(bool(copies & set(next(stream))) for _ in range(11))  # one epoch: 11 batches

    assert batches_holding_a_copy(regroup=False) == 1  # side by side: one update an epoch
    assert batches_holding_a_copy(regroup=True) >= 6


def test_a_sentence_cap_cuts_the_one_batch_of_the_shortest_pairs_into_several():
    import random

    from explorer.train.translator import batches

    examples = [([1, 0], [2, 0])] * 100 + [([5, 6, 7, 0], [5, 6, 7, 0])] * 10  # short pairs fill one batch
    uncapped = batches(examples, batch_tokens=400, rng=random.Random(0))
    capped = batches(examples, batch_tokens=400, rng=random.Random(0), max_sentences=25)
    short = set(range(100))
    assert sum(bool(short & set(next(uncapped))) for _ in range(2)) == 1
    first_epoch = [next(capped) for _ in range(5)]
    assert sorted(len(batch) for batch in first_epoch) == [10, 25, 25, 25, 25]
