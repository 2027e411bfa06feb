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
