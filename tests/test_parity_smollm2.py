"""SmolLM2-135M-Instruct with its real weights against transformers' LlamaForCausalLM (fp32)."""

from __future__ import annotations

import json

import pytest
import torch

from explorer.model import Record

pytestmark = pytest.mark.slow

PROMPTS = {
    "english": "The capital of France is",
    "code": "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "non-latin": "Привет! Как дела? 東京は日本の首都です。",
    "emoji": "I love pizza 🍕 and cats 🐈‍⬛!",
}


@pytest.mark.parametrize("kind", list(PROMPTS))
def test_logits_and_residual_stream_match(smollm2, hf_smollm2, kind):
    ids = torch.tensor([smollm2.tokenizer(PROMPTS[kind])["input_ids"]])
    with torch.no_grad():
        expected = hf_smollm2(ids, output_hidden_states=True, output_attentions=True)
        ours = smollm2.model(ids, record=Record.of("residual", "attention"))
    assert (ours.logits - expected.logits).abs().max() <= 1e-3
    n_layers = smollm2.config.n_layers
    assert (ours.trace["decoder.embed"] - expected.hidden_states[0]).abs().max() <= 1e-5
    for layer in range(n_layers - 1):
        ref = expected.hidden_states[layer + 1]
        diff = (ours.trace.residual(layer) - ref).abs().max()
        assert diff <= 1e-3 * max(1.0, float(ref.abs().max())), f"layer {layer}: {diff}"
    for layer in range(n_layers):
        assert (ours.trace.self_attention(layer) - expected.attentions[layer]).abs().max() <= 1e-4


def test_architecture_read_from_gguf(smollm2):
    c = smollm2.config
    assert (c.n_layers, c.n_heads, c.n_kv_heads, c.d_model, c.d_ff) == (30, 9, 3, 576, 1536)
    assert (c.norm, c.positions, c.activation, c.gated_ffn, c.tie_embeddings) == ("rms", "rope", "silu", True, True)
    assert c.rope_theta == 100000.0


def reference_lens(hf_smollm2, ids: list[int], position: int) -> torch.Tensor:
    """(layers + 1, vocab) transformers' own logit lens: each hidden state through its final
    norm and head. Its last hidden state already has the norm applied."""
    with torch.no_grad():
        states = hf_smollm2(torch.tensor([ids]), output_hidden_states=True).hidden_states
        rows = [hf_smollm2.model.norm(h[0, position]) for h in states[:-1]] + [states[-1][0, position]]
        return hf_smollm2.lm_head(torch.stack(rows)).softmax(-1)


@pytest.mark.parametrize("at", ["newest", "earlier"])
def test_logit_lens_every_layer_matches_transformers(smollm2, hf_smollm2, at):
    """Every row of the lens (not only the last): the residual stream after each layer, through
    the final norm and head, as transformers computes it; at the newest token (the step's kept
    residuals) and at an earlier one (a parallel pass)."""
    import explorer
    from explorer.analysis import lens

    session = explorer.GenerationSession(smollm2, "The capital of France is Paris. The capital of Italy is")
    for _ in range(3):
        session.step()
    position = len(session.token_ids) - 1 if at == "newest" else session.prompt_length - 2
    result = lens.logit_lens(session, position=position, k=5)
    expected = reference_lens(hf_smollm2, session.token_ids, position)  # (layers + 1, vocab)
    assert len(result.rows) == smollm2.config.n_layers + 1
    for row, reference in zip(result.rows, expected, strict=True):
        assert torch.allclose(torch.tensor(row.probabilities), reference[row.token_ids], atol=1e-4), row.label
        assert abs(row.probabilities[0] - float(reference.max())) <= 1e-4, row.label  # its top is the top


def test_the_induction_probe_finds_the_known_induction_heads(smollm2):
    """SmolLM2's induction heads sit in layers 17 and 18: the probe's four strongest heads are
    there, and so is every head it tags as induction."""
    import numpy as np

    import explorer
    from explorer.analysis import roles

    session = explorer.GenerationSession(smollm2, "The capital of France is Paris. The capital of Germany is")
    session.step()
    result = roles.head_roles(session)
    scores = result.scores["induction"]  # (layers, heads)
    strongest = np.argsort(scores.ravel())[::-1][:4]
    assert {int(i) // smollm2.config.n_heads for i in strongest} <= {17, 18}
    tagged = [(i, h) for i, row in enumerate(result.tags) for h, tag in enumerate(row) if tag == "induction"]
    assert tagged and all(layer in (17, 18) for layer, _ in tagged), tagged


def test_the_converted_cache_is_read_later_matches_transformers_and_is_redone_when_stale(tmp_path, hf_smollm2):
    """The README's "later starts read the cache": the first load converts the GGUF, the second
    reads the same tensors back, a model built from the cache matches transformers, and a cache
    made from another file (or damaged) is not read."""
    from explorer.loading.checkpoints import load_gguf_with_cache, read_converted
    from explorer.loading.registry import model_from_state
    from explorer.loading.sources import smollm2_gguf_path

    gguf, folder = smollm2_gguf_path(), tmp_path / "cache"
    config, state, _, converted = load_gguf_with_cache(gguf, folder, progress=False)
    assert converted
    cached_config, cached_state, tokenizer, converted_again = load_gguf_with_cache(gguf, folder, progress=False)
    assert not converted_again and cached_config == config
    assert cached_state.keys() == state.keys() and all(torch.equal(cached_state[k], state[k]) for k in state)

    model = model_from_state(cached_config, cached_state, device="cpu")
    ids = torch.tensor([tokenizer("Converted once, read many times.")["input_ids"]])
    with torch.no_grad():
        assert (model(ids).logits - hf_smollm2(ids).logits).abs().max() <= 1e-3

    source = json.loads((folder / "source.json").read_text())
    assert read_converted(folder, {**source, "size": source["size"] + 1}) is None  # another GGUF
    (folder / "model.safetensors").write_bytes(b"damaged")
    assert read_converted(folder, source) is None
    assert load_gguf_with_cache(gguf, folder, progress=False)[3]  # converted anew
