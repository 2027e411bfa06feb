"""The embedded translator in assets/: loads offline, matches transformers, translates."""

from __future__ import annotations

import json
import random

import pytest
import torch

import explorer
from explorer.loading import TRANSLATOR_MODEL
from explorer.loading.registry import ASSETS
from explorer.train.data import build_dataset

FOLDER = ASSETS / TRANSLATOR_MODEL


@pytest.fixture(scope="module")
def translator():
    return explorer.load_model(TRANSLATOR_MODEL)


def translate(loaded, text: str, use_cache: bool) -> str:
    session = explorer.GenerationSession(loaded, text, use_cache=use_cache)
    while not session.finished and len(session.token_ids) < 64:
        session.step()
    return session.generated_text()


def test_listed_as_the_embedded_translator():
    entry = next(e for e in explorer.list_models() if e.name == TRANSLATOR_MODEL)
    assert entry.available and entry.is_encoder_decoder and entry.source == "embedded"
    assert "numbers" in entry.description


def test_small_enough_to_ship():
    assert (FOLDER / "model.safetensors").stat().st_size <= 20 * 1024 * 1024
    config = json.loads((FOLDER / "config.json").read_text())
    assert config["decoder_attention_heads"] >= 4


def test_matches_transformers(translator):
    from transformers import MarianMTModel, MarianTokenizer

    reference = MarianMTModel.from_pretrained(FOLDER, attn_implementation="eager").eval()
    tokenizer = MarianTokenizer.from_pretrained(FOLDER)
    src = torch.tensor([tokenizer("Wednesday, March 3, 2021")["input_ids"]])
    tgt = torch.tensor([[translator.config.decoder_start_token_id, *tokenizer(text_target="Mittwoch")["input_ids"]]])
    with torch.no_grad():
        expected = reference(input_ids=src, decoder_input_ids=tgt).logits
        memory, _ = translator.model.encode(src)
        ours = translator.model(tgt, memory).logits
    assert (ours - expected).abs().max() <= 1e-4


def reference_translation(text: str) -> str:
    from transformers import MarianMTModel, MarianTokenizer

    model = MarianMTModel.from_pretrained(FOLDER).eval()
    tokenizer = MarianTokenizer.from_pretrained(FOLDER)
    with torch.no_grad():
        out = model.generate(**tokenizer([text], return_tensors="pt"), num_beams=1, do_sample=False, max_new_tokens=48)
    return tokenizer.decode(out[0], skip_special_tokens=True)


def test_held_out_sample_translates_as_transformers_does_with_the_cache_on_and_off(translator):
    """Our greedy generation equals transformers' greedy generate, cache on and off.

    (The model's accuracy against the references is measured by the training script and stated
    in its model card; it does not yet reach the targets of its issue.)
    """
    test = build_dataset(seed=0)["test"]
    rng = random.Random(1)
    by_category = {}
    for pair in test:
        by_category.setdefault(pair.category, []).append(pair)
    sample = [p for pairs in by_category.values() for p in rng.sample(pairs, min(2, len(pairs)))]
    correct = 0
    for pair in sample:
        cached = translate(translator, pair.english, use_cache=True)
        assert translate(translator, pair.english, use_cache=False) == cached
        assert cached == reference_translation(pair.english)
        correct += cached == pair.german
    assert correct >= len(sample) // 2  # a real translator, not noise


def test_known_translations(translator):
    assert translate(translator, "Wednesday, March 3, 2021", use_cache=True) == "Mittwoch, 3. März 2021"
    assert translate(translator, "three hundred and forty-two", use_cache=True) == "dreihundertzweiundvierzig"


def test_spaces_around_the_input_do_not_matter(translator):
    text = "Wednesday, March 3, 2021"
    assert translate(translator, f"  {text}  ", use_cache=True) == translate(translator, text, use_cache=True)


def test_out_of_domain_does_not_crash(translator):
    text = translate(translator, "I like cats", use_cache=True)
    assert isinstance(text, str)
