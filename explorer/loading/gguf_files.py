"""Read a GGUF file (llama.cpp's format) into our names: Llama (and Mistral), Qwen2, Qwen3,
Gemma 3 and Phi-3 architectures.

GGUF stores quantised weights (Q4_0, Q4_1, Q5_0, Q8_0, the K-quants, F16, BF16, ...); the
``gguf`` package turns them back into float32. The files share one layout (the metadata read
here, the tensor names in ``GGUF_LAYER_NAMES``); what an architecture does its own way (a Llama
file's reordered query/key rows, Phi-3's fused matrices, what llama.cpp fixes in code for Gemma 3)
is in that family's file under ``explorer/loading/families/`` (its ``GGUF``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from explorer.model import ModelConfig

from .errors import ModelLoadError
from .families import GGUF_ARCHITECTURES, GgufArchitecture, without_tied_head

GGUF_LAYER_NAMES = {
    "attn_norm": "self_attn_norm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",  # Qwen3, Gemma 3
    "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "self_attn_norm_after",  # Gemma 3's sandwich
    "ffn_norm": "ffn_norm",
    "post_ffw_norm": "ffn_norm_after",
    "ffn_gate": "ffn.gate_proj",
    "ffn_up": "ffn.up_proj",
    "ffn_down": "ffn.down_proj",
}


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def gguf_config(reader, name: str) -> ModelConfig:
    """The ModelConfig of a GGUF file, from its ``{architecture}.*`` metadata."""
    arch = _field(reader, "general.architecture")
    if arch not in GGUF_ARCHITECTURES:
        raise ModelLoadError(
            f"{name} holds a {arch!r} model; the explorer reads GGUF files of the "
            f"{', '.join(GGUF_ARCHITECTURES)} architectures"
        )
    architecture = GGUF_ARCHITECTURES[arch]

    def meta(key: str, default=None):
        return _field(reader, f"{arch}.{key}", default)

    n_heads = int(meta("attention.head_count"))
    d_model = int(meta("embedding_length"))
    head_dim = int(meta("attention.key_length", d_model // n_heads))
    tensors = {t.name for t in reader.tensors}
    window = meta("attention.sliding_window")
    config = ModelConfig(
        family=architecture.family,
        vocab_size=len(_field(reader, "tokenizer.ggml.tokens")),
        d_model=d_model,
        n_layers=int(meta("block_count")),
        n_heads=n_heads,
        n_kv_heads=int(meta("attention.head_count_kv", n_heads)),
        head_dim=head_dim,
        d_ff=int(meta("feed_forward_length")),
        max_positions=int(meta("context_length")),
        norm="rms",
        norm_eps=float(meta("attention.layer_norm_rms_epsilon")),
        positions="rope",
        rope_theta=float(meta("rope.freq_base", 10000.0)),
        rotary_dim=int(meta("rope.dimension_count", head_dim)),
        activation=architecture.activation,
        gated_ffn=True,
        qkv_bias="blk.0.attn_q.bias" in tensors,
        qk_norm="blk.0.attn_q_norm.weight" in tensors,
        out_bias=False,
        ffn_bias=False,
        tie_embeddings="output.weight" not in tensors,
        sliding_window=int(window) if window else None,
        bos_token_id=_field(reader, "tokenizer.ggml.bos_token_id"),
        eos_token_id=_field(reader, "tokenizer.ggml.eos_token_id"),
        pad_token_id=_field(reader, "tokenizer.ggml.padding_token_id"),
        extra={"source": name, "gguf_name": _field(reader, "general.name"), "gguf_architecture": arch},
    )
    return architecture.complete(config)


def gguf_state(reader, config: ModelConfig, progress: bool) -> dict[str, torch.Tensor]:
    """Every tensor dequantised to float32, in our names."""
    import gguf  # imported here: only this loader needs it

    architecture = GGUF_ARCHITECTURES[config.extra["gguf_architecture"]]
    state: dict[str, torch.Tensor] = {}
    for tensor in tqdm(
        reader.tensors, desc=f"Converting {config.extra['source']}", unit="tensor", disable=not progress
    ):
        w = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)  # (out, in)
        state.update(_renamed(tensor.name, w, config, architecture))
    return state


GGUF_TOP_NAMES = {
    "token_embd.weight": "embed_tokens.weight",
    "output_norm.weight": "decoder.final_norm.weight",
    "output.weight": "lm_head.weight",
}


def _renamed(name: str, w: np.ndarray, config: ModelConfig, architecture: GgufArchitecture) -> dict[str, torch.Tensor]:
    """One GGUF tensor under our name(s); the architecture's own layout first (``families/``)."""
    if name in GGUF_TOP_NAMES:
        return {GGUF_TOP_NAMES[name]: torch.from_numpy(w)}
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.(weight|bias)", name)
    if m is None:
        hint = " (rotary scaling, not supported yet)" if "rope" in name else ""
        raise ModelLoadError(f"unexpected GGUF tensor {name!r}{hint}")
    layer, kind, part = f"decoder.layers.{m[1]}", m[2], m[3]
    own = architecture.tensor(kind, w, config) if architecture.tensor else None
    if own is None:
        if kind not in GGUF_LAYER_NAMES:
            raise ModelLoadError(f"unexpected GGUF tensor {name!r}")
        own = {GGUF_LAYER_NAMES[kind]: w}
    return {f"{layer}.{module}.{part}": torch.from_numpy(np.ascontiguousarray(x)) for module, x in own.items()}


def read_gguf(path: Path, progress: bool = True) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError, KeyError) as error:
        raise ModelLoadError(f"{path.name} is not a readable GGUF file ({type(error).__name__})") from error
    config = gguf_config(reader, path.name)
    return config, without_tied_head(gguf_state(reader, config, progress), config)
