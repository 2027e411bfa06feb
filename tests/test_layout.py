"""The weight layout for fast steps changes strides only: names, shapes, values and ties stay."""

from __future__ import annotations

import torch
from safetensors.torch import load_file

import explorer
from explorer.model.layout import prefers_column_major, store_for_steps


def column_major(t: torch.Tensor) -> bool:
    return t.dim() == 2 and t.t().is_contiguous() and not t.is_contiguous()


def test_wide_weights_are_stored_column_major_and_keep_the_checkpoints_values(checkpoints):
    """The Llama checkpoint: its output head and SwiGLU gate/up are wider than they are tall."""
    loaded = explorer.load_model(str(checkpoints["llama"]))
    model = loaded.model
    saved = load_file(str(next(checkpoints["llama"].glob("*.safetensors"))))
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            assert column_major(module.weight) == prefers_column_major(module.weight), name
    assert column_major(model.decoder.layers[0].ffn.gate_proj.weight)
    assert model.decoder.layers[0].self_attn.o_proj.weight.is_contiguous()  # square: as stored
    ours = model.state_dict()
    # Every parameter keeps its (out, in) shape and the checkpoint's values, under its own name.
    ffn = "decoder.layers.0.ffn"
    assert torch.equal(ours[f"{ffn}.gate_proj.weight"], saved["model.layers.0.mlp.gate_proj.weight"])
    assert ours[f"{ffn}.gate_proj.weight"].shape == (loaded.config.d_ff, loaded.config.d_model)


def test_a_tied_token_table_stays_one_tensor(checkpoints):
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    model = loaded.model
    assert loaded.config.tie_embeddings
    assert model.lm_head.weight is model.embed_tokens.weight is model.decoder.embed.embed_tokens.weight
    assert column_major(model.lm_head.weight)  # vocab > d_model
    ids = torch.tensor([[1, 5, 7]])
    assert torch.equal(model.embed_tokens(ids)[0], model.lm_head.weight.detach()[[1, 5, 7]])


def test_the_layout_gives_the_same_logits_as_the_stored_one(checkpoints):
    """Only the order of the sums changes: logits agree to float32 rounding, tokens exactly."""
    loaded = explorer.load_model(str(checkpoints["llama"]))
    ids = torch.tensor([[3, 17, 42, 9, 120]])
    fast = loaded.model(ids).logits
    plain = explorer.model.build_model(loaded.config)
    plain.load_weights({k: v.contiguous() for k, v in loaded.model.state_dict().items()})
    reference = plain(ids).logits
    assert (fast - reference).abs().max() <= 1e-5
    store_for_steps(plain)
    assert torch.equal(plain(ids).logits, fast)
