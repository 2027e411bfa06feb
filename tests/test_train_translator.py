"""The translator's data and training script (a tiny run, so that it cannot rot)."""

from __future__ import annotations

import json

import torch

from explorer.train.data import CATEGORIES, build_dataset, split_of


def test_split_is_by_value():
    data = build_dataset(seed=0, scale=0.02)
    values = {name: {(p.category, p.value) for p in pairs} for name, pairs in data.items()}
    assert not values["train"] & values["test"]
    assert not values["train"] & values["validation"]
    for name, pairs in data.items():
        assert all(split_of(p.category, p.value) == name for p in pairs)
    english = [p.english for pairs in data.values() for p in pairs]
    assert len(english) == len(set(english))  # deduplicated


def test_pairs_are_library_renderings():
    data = build_dataset(seed=0, scale=0.05)
    pairs = [p for split in data.values() for p in split]
    assert {p.category for p in pairs} == set(CATEGORIES)
    from num2words import num2words

    for p in pairs:
        if p.category == "cardinal":  # a typed final period is carried over to the German
            assert p.german.removesuffix(".") == num2words(int(p.value), lang="de")


def test_tiny_training_run_end_to_end(tmp_path):
    from transformers import MarianMTModel

    import explorer
    from explorer.train.translator import TrainConfig, train

    out = tmp_path / "tiny-translator"
    config = TrainConfig(
        out=str(out), data_scale=0.01, vocab_size=200, d_model=32, layers=2, heads=4, d_ff=64, steps=15,
        batch_tokens=600, warmup=5, eval_limit=30,
    )  # fmt: skip
    metrics = train(config, progress=False)
    for name in ("config.json", "model.safetensors", "source.spm", "vocab.json", "README.md", "metrics.json"):
        assert (out / name).is_file()
    saved = json.loads((out / "metrics.json").read_text())
    assert set(saved) >= {"exact_match", "exact_match_by_category", "chrf", "alignment_by_layer", "data_sizes"}
    assert len(metrics["alignment_by_layer"]) == 2
    assert "Reproduce" in (out / "README.md").read_text()

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


def test_small_numbers_are_repeated_in_training_only_as_asked():
    from explorer.train.data import Pair
    from explorer.train.translator import with_small_numbers_repeated

    pairs = [
        Pair("twenty-one", "einundzwanzig", "cardinal", "21"),
        Pair("twenty-first", "einundzwanzigste", "ordinal", "21"),
        Pair("three hundred", "dreihundert", "cardinal", "300"),
        Pair("21", "21", "number", "21"),
    ]
    repeated = with_small_numbers_repeated(pairs, 3)
    assert [p.english for p in repeated].count("twenty-one") == 3
    assert [p.english for p in repeated].count("twenty-first") == 3
    assert [p.english for p in repeated].count("three hundred") == 1
    assert [p.english for p in repeated].count("21") == 1
    assert with_small_numbers_repeated(pairs, 1) == pairs
