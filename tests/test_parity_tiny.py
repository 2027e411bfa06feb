"""Our transformer against transformers' eager attention, on tiny random checkpoints (fp32)."""

from __future__ import annotations

import pytest
import torch

import explorer
from explorer.model import Record

TOL = 1e-4
TEXT = "The quick brown fox: def add(a, b) in 2017."


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2", "qwen3", "mistral", "phi3", "opt", "gpt_neox"])
def test_decoder_only_matches_transformers(checkpoints, family):
    from transformers import AutoModelForCausalLM

    folder = checkpoints[family]
    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    loaded = explorer.load_model(str(folder))
    assert loaded.config.family == family
    ids = torch.tensor([loaded.tokenizer(TEXT)["input_ids"]])
    with torch.no_grad():
        expected = ref(ids, output_attentions=True, output_hidden_states=True)
        ours = loaded.model(ids, record=Record.everything())

    assert (ours.logits - expected.logits).abs().max() <= TOL
    n_layers = loaded.config.n_layers
    assert len(expected.attentions) == n_layers
    for layer in range(n_layers):
        probs = ours.trace.self_attention(layer)  # (1, heads, T, T)
        assert probs.shape == expected.attentions[layer].shape
        assert (probs - expected.attentions[layer]).abs().max() <= TOL
    # hidden_states[i + 1] is the residual stream after layer i (the last one after the final norm)
    for layer in range(n_layers - 1):
        assert (ours.trace.residual(layer) - expected.hidden_states[layer + 1]).abs().max() <= TOL


def test_marian_matches_transformers(checkpoints):
    from transformers import MarianMTModel

    folder = checkpoints["marian"]
    ref = MarianMTModel.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    loaded = explorer.load_model(str(folder))
    config = loaded.config
    assert config.is_encoder_decoder and config.family == "marian" and not config.norm_first
    src = torch.tensor([loaded.tokenizer("twenty-one on March 3, 2021")["input_ids"]])
    tgt = torch.tensor([[config.decoder_start_token_id, 5, 9, 14, 3, 7]])
    with torch.no_grad():
        expected = ref(input_ids=src, decoder_input_ids=tgt, output_attentions=True, output_hidden_states=True)
        memory, enc_trace = loaded.model.encode(src, record=Record.everything())
        ours = loaded.model(tgt, memory, record=Record.everything())

    assert (memory - expected.encoder_last_hidden_state).abs().max() <= TOL
    assert (ours.logits - expected.logits).abs().max() <= TOL
    for layer in range(config.n_encoder_layers):
        assert (enc_trace.self_attention(layer, "encoder") - expected.encoder_attentions[layer]).abs().max() <= TOL
    for layer in range(config.n_layers):
        assert (ours.trace.self_attention(layer) - expected.decoder_attentions[layer]).abs().max() <= TOL
        cross = ours.trace.cross_attention(layer)  # (1, heads, T, S)
        assert cross.shape == (1, config.n_heads, tgt.shape[1], src.shape[1])
        assert (cross - expected.cross_attentions[layer]).abs().max() <= TOL


def test_records_every_kind_with_named_shapes(checkpoints):
    loaded = explorer.load_model(str(checkpoints["llama"]))
    c = loaded.config
    ids = torch.tensor([loaded.tokenizer(TEXT)["input_ids"]])
    T = ids.shape[1]
    with torch.no_grad():
        trace = loaded.model(ids, record=Record.everything()).trace
    assert trace["decoder.0.self_attn.q"].shape == (1, c.n_heads, T, c.head_dim)
    assert trace["decoder.0.self_attn.k"].shape == (1, c.n_kv_heads, T, c.head_dim)
    assert trace["decoder.0.self_attn.v"].shape == (1, c.n_kv_heads, T, c.head_dim)
    scores = trace["decoder.1.self_attn.scores"]
    assert scores.shape == (1, c.n_heads, T, T)
    assert torch.isinf(scores[0, 0, 0, 1:]).all()  # the future is -inf before softmax
    assert trace["decoder.embed"].shape == (1, T, c.d_model)
    assert trace["decoder.2.resid_after_attn"].shape == (1, T, c.d_model)
    assert trace["logits"].shape == (1, T, c.vocab_size)


def test_recording_off_keeps_nothing_and_changes_nothing(checkpoints):
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    ids = torch.tensor([loaded.tokenizer(TEXT)["input_ids"]])
    with torch.no_grad():
        fast = loaded.model(ids)
        recorded = loaded.model(ids, record=Record.of("attention"))
    assert fast.trace.names() == []
    assert (fast.logits - recorded.logits).abs().max() <= 1e-5


def test_settings_the_explorer_lacks_are_named():
    from explorer.loading import ModelLoadError
    from explorer.loading.hf_convert import convert

    config = {"model_type": "opt", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
              "num_attention_heads": 2, "ffn_dim": 16, "max_position_embeddings": 32,
              "word_embed_proj_dim": 4}  # fmt: skip
    with pytest.raises(ModelLoadError, match=r"opt .*word_embed_proj_dim"):
        convert(config, {})
    families = "gpt2, gpt_neox, llama, marian, mistral, opt, phi3, qwen2, qwen3"
    with pytest.raises(ModelLoadError, match=rf"'mamba' is not supported.*{families}"):
        convert({"model_type": "mamba"}, {})


def test_phi3_with_partial_rotary_matches_transformers(tmp_path):
    """Phi-4-mini's kind: rotary on the first half of each head only."""
    from transformers import AutoModelForCausalLM

    from tests.builders import tiny_phi3

    folder = tiny_phi3(tmp_path / "partial", partial_rotary=0.5)
    loaded = explorer.load_model(str(folder))
    assert (loaded.config.rotary_dim, loaded.config.head_dim) == (8, 16)
    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    ids = torch.tensor([loaded.tokenizer(TEXT)["input_ids"]])
    with torch.no_grad():
        assert (loaded.model(ids).logits - ref(ids).logits).abs().max() <= TOL


def test_a_short_sliding_window_becomes_the_context_window(tmp_path):
    """The explorer does not draw a sliding window yet: within a window of 12 positions a model
    is exactly transformers', and a 13th position is refused with the context window's message."""
    from transformers import AutoModelForCausalLM

    from explorer.model import ContextWindowError
    from tests.builders import tiny_mistral

    folder = tiny_mistral(tmp_path / "windowed", window=12)
    loaded = explorer.load_model(str(folder))
    assert loaded.config.max_positions == 12 and loaded.config.extra["sliding_window"] == 12
    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    ids = torch.tensor([list(range(3, 15))])  # 12 positions
    with torch.no_grad():
        assert (loaded.model(ids).logits - ref(ids).logits).abs().max() <= TOL
        with pytest.raises(ContextWindowError, match="context window of 12"):
            loaded.model(torch.tensor([list(range(3, 16))]))
