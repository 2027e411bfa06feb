"""SmolLM2-135M-Instruct with its real weights against transformers' LlamaForCausalLM (fp32)."""

from __future__ import annotations

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
