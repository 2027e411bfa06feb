"""Our transformer against transformers' eager attention, on tiny random checkpoints (fp32)."""

from __future__ import annotations

import pytest
import torch

import explorer
from explorer.model import Record

TOL = 1e-4
TEXT = "The quick brown fox: def add(a, b) in 2017."


DECODERS = ["gpt2", "llama", "qwen2", "qwen3", "mistral", "phi3", "opt", "gpt_neox", "gemma3_text"]


@pytest.mark.parametrize("family", DECODERS)
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


@pytest.mark.parametrize("family", ["marian", "bart", "mbart", "t5", "flan_t5"])
def test_encoder_decoder_matches_transformers(checkpoints, family):
    from transformers import AutoModelForSeq2SeqLM

    folder = checkpoints[family]
    ref = AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    loaded = explorer.load_model(str(folder))
    config = loaded.config
    assert config.is_encoder_decoder and config.family == family.removeprefix("flan_")
    assert config.norm_first == (family not in ("marian", "bart"))
    src = torch.tensor([loaded.tokenizer("twenty-one on March 3, 2021, and a few words more")["input_ids"]])
    # T5's relative buckets are log-spaced up to 20 positions in the tiny checkpoints: go past them
    tgt = torch.tensor([[config.decoder_start_token_id, *range(5, 30)]])
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
    # the residual stream after each layer but the last (transformers gives the last after the final norm)
    embedded = expected.decoder_hidden_states[0]
    assert (ours.trace["decoder.embed"] - embedded).abs().max() <= TOL
    for layer in range(config.n_layers - 1):
        assert (ours.trace.residual(layer) - expected.decoder_hidden_states[layer + 1]).abs().max() <= TOL
    for layer in range(config.n_encoder_layers - 1):
        assert (enc_trace.residual(layer, "encoder") - expected.encoder_hidden_states[layer + 1]).abs().max() <= TOL


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
    from explorer.loading.families import convert

    config = {"model_type": "opt", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
              "num_attention_heads": 2, "ffn_dim": 16, "max_position_embeddings": 32,
              "word_embed_proj_dim": 4}  # fmt: skip
    with pytest.raises(ModelLoadError, match=r"opt .*word_embed_proj_dim"):
        convert(config, {})
    families = "bart, gemma3_text, gpt2, gpt_neox, llama, marian, mbart, mistral, opt, phi3, qwen2, qwen3, t5"
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


def test_a_sliding_window_hides_what_is_further_back_as_in_transformers(tmp_path):
    """Mistral with a window of 8 on a text three times as long: every layer's attention and the
    logits are transformers', and each query reads exactly its last 8 positions."""
    from transformers import AutoModelForCausalLM

    from tests.builders import tiny_mistral

    folder = tiny_mistral(tmp_path / "windowed", window=8)
    loaded = explorer.load_model(str(folder))
    assert loaded.config.sliding_window == 8 and loaded.config.window_of(1) == 8
    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    ids = torch.tensor([loaded.tokenizer(TEXT)["input_ids"]])
    assert ids.shape[1] >= 24
    with torch.no_grad():
        expected = ref(ids, output_attentions=True)
        ours = loaded.model(ids, record=Record.of("attention"))
    assert (ours.logits - expected.logits).abs().max() <= TOL
    for layer in range(loaded.config.n_layers):
        probs = ours.trace.self_attention(layer)[0]  # (heads, T, T)
        assert (probs - expected.attentions[layer][0]).abs().max() <= TOL
        reads = (probs > 0).sum(-1)  # (heads, T): how many keys each query reads
        assert reads.max() == 8 and (reads[:, 7:] == 8).all()


def test_gemma3_layers_alternate_local_and_global(checkpoints):
    """The tiny Gemma 3: layers 0 and 2 read a window of 6, layers 1 and 3 everything before."""
    loaded = explorer.load_model(str(checkpoints["gemma3_text"]))
    config = loaded.config
    assert [config.window_of(i) for i in range(4)] == [6, None, 6, None]
    assert config.sandwich_norm and config.qk_norm and config.rope_local_theta == 100.0
    ids = torch.tensor([loaded.tokenizer(TEXT)["input_ids"]])
    with torch.no_grad():
        trace = loaded.model(ids, record=Record.of("attention")).trace
    last = ids.shape[1] - 1
    assert (trace.self_attention(0)[0, :, last, : last - 5] == 0).all()
    assert (trace.self_attention(1)[0, :, last, : last - 5] > 0).all()
