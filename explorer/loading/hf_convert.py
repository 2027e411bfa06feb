"""Hugging Face checkpoint folders -> (ModelConfig, state dict in our names).

One function per family turns ``config.json`` into a ``ModelConfig`` and renames the
weights. GPT-2 stores its projections as Conv1D (in, out) matrices with Q, K and V fused,
so they are transposed and split; Llama and Marian use nn.Linear (out, in) already.
"""

from __future__ import annotations

import dataclasses
import logging
import re

import torch

from explorer.model import ModelConfig

from .errors import ModelLoadError

log = logging.getLogger("decoder_explorer")

ACTIVATION_NAMES = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}


def _activation(name: str) -> str:
    if name not in ACTIVATION_NAMES:
        raise ModelLoadError(f"activation {name!r} is not supported; supported: {sorted(ACTIVATION_NAMES)}")
    return ACTIVATION_NAMES[name]


# ---------------------------------------------------------------- GPT-2
def gpt2_config(hf: dict) -> ModelConfig:
    d = hf["n_embd"]
    return ModelConfig(
        family="gpt2",
        vocab_size=hf["vocab_size"],
        d_model=d,
        n_layers=hf["n_layer"],
        n_heads=hf["n_head"],
        d_ff=hf.get("n_inner") or 4 * d,
        max_positions=hf["n_positions"],
        norm="layer",
        norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        norm_first=True,
        positions="learned",
        activation=_activation(hf.get("activation_function", "gelu_new")),
        tie_embeddings=hf.get("tie_word_embeddings", True),
        bos_token_id=hf.get("bos_token_id"),
        eos_token_id=hf.get("eos_token_id"),
    )


def gpt2_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    d = config.d_model
    for name, w in hf_state.items():
        name = name.removeprefix("transformer.")
        if name in ("wte.weight",):
            out["embed_tokens.weight"] = w
        elif name == "wpe.weight":
            out["decoder.embed.positions.weight"] = w
        elif name.startswith("ln_f."):
            out["decoder.final_norm." + name.split(".")[-1]] = w
        elif name == "lm_head.weight":
            if not config.tie_embeddings:
                out["lm_head.weight"] = w
        elif m := re.fullmatch(r"h\.(\d+)\.(.+)", name):
            layer, rest = f"decoder.layers.{m[1]}", m[2]
            if rest in ("attn.bias", "attn.masked_bias"):
                continue  # causal-mask buffers of old checkpoints, not weights
            if rest.startswith("attn.c_attn."):
                kind = rest.split(".")[-1]
                fused = w.t() if kind == "weight" else w  # Conv1D (in, 3d) -> (3d, in)
                for proj, part in zip(("q_proj", "k_proj", "v_proj"), fused.split(d, dim=0), strict=True):
                    out[f"{layer}.self_attn.{proj}.{kind}"] = part.contiguous()
                continue
            simple = {
                "attn.c_proj": "self_attn.o_proj",
                "mlp.c_fc": "ffn.up_proj",
                "mlp.c_proj": "ffn.down_proj",
                "ln_1": "self_attn_norm",
                "ln_2": "ffn_norm",
            }
            module, kind = rest.rsplit(".", 1)
            if module not in simple:
                raise ModelLoadError(f"unexpected GPT-2 weight {name!r}")
            is_conv = module.startswith(("attn.", "mlp.")) and kind == "weight"
            out[f"{layer}.{simple[module]}.{kind}"] = w.t().contiguous() if is_conv else w
        else:
            raise ModelLoadError(f"unexpected GPT-2 weight {name!r}")
    return out


# ---------------------------------------------------------------- Llama
def llama_config(hf: dict) -> ModelConfig:
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in ("default", None):
        raise ModelLoadError(f"RoPE scaling {rope_type!r} is not supported; only plain RoPE is")
    theta = rope.get("rope_theta", hf.get("rope_theta", 10000.0))
    return ModelConfig(
        family="llama",
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"],
        n_kv_heads=hf.get("num_key_value_heads") or hf["num_attention_heads"],
        head_dim=hf.get("head_dim"),
        d_ff=hf["intermediate_size"],
        max_positions=hf["max_position_embeddings"],
        norm="rms",
        norm_eps=hf.get("rms_norm_eps", 1e-6),
        positions="rope",
        rope_theta=float(theta),
        activation=_activation(hf.get("hidden_act", "silu")),
        gated_ffn=True,
        qkv_bias=hf.get("attention_bias", False),
        out_bias=hf.get("attention_bias", False),
        ffn_bias=hf.get("mlp_bias", False),
        tie_embeddings=hf.get("tie_word_embeddings", False),
        bos_token_id=hf.get("bos_token_id"),
        eos_token_id=_first(hf.get("eos_token_id")),
        pad_token_id=hf.get("pad_token_id"),
    )


LLAMA_LAYER_NAMES = {
    "input_layernorm": "self_attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "self_attn.q_proj",
    "self_attn.k_proj": "self_attn.k_proj",
    "self_attn.v_proj": "self_attn.v_proj",
    "self_attn.o_proj": "self_attn.o_proj",
    "self_attn.q_norm": "self_attn.q_norm",  # Qwen3
    "self_attn.k_norm": "self_attn.k_norm",
    "mlp.gate_proj": "ffn.gate_proj",
    "mlp.up_proj": "ffn.up_proj",
    "mlp.down_proj": "ffn.down_proj",
}


def llama_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        if name == "model.embed_tokens.weight":
            out["embed_tokens.weight"] = w
        elif name == "model.norm.weight":
            out["decoder.final_norm.weight"] = w
        elif name == "lm_head.weight":
            if not config.tie_embeddings:
                out["lm_head.weight"] = w
        elif m := re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)", name):
            if m[2] not in LLAMA_LAYER_NAMES:
                raise ModelLoadError(f"unexpected Llama weight {name!r}")
            out[f"decoder.layers.{m[1]}.{LLAMA_LAYER_NAMES[m[2]]}.{m[3]}"] = w
        elif name.endswith("rotary_emb.inv_freq"):
            continue
        else:
            raise ModelLoadError(f"unexpected Llama weight {name!r}")
    return out


# ---------------------------------------------------------------- Llama's relatives
HF_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}


def with_window(config: ModelConfig, window: int | None, hf_layer_types: list[str] | None = None) -> ModelConfig:
    """A sliding attention window: on every layer, or on the layers ``hf_layer_types`` marks
    "sliding_attention" (transformers' names)."""
    if not window:
        return config
    types = None
    if hf_layer_types is not None:
        unknown = sorted(set(hf_layer_types) - set(HF_LAYER_TYPES))
        if unknown:
            raise ModelLoadError(
                f"this {config.family} model has {', '.join(unknown)} layers, not supported yet; "
                f"the explorer reads {' and '.join(HF_LAYER_TYPES)} layers"
            )
        types = [HF_LAYER_TYPES[t] for t in hf_layer_types]
        if "sliding" not in types:
            return config
    return dataclasses.replace(config, sliding_window=int(window), layer_types=types)


def qwen_window(config: ModelConfig, hf: dict) -> ModelConfig:
    """Qwen's optional window: on the layers from max_window_layers on, unless layer_types says."""
    if not hf.get("use_sliding_window"):
        return config
    types = hf.get("layer_types")
    if types is None:
        first = hf.get("max_window_layers", 28)
        types = ["sliding_attention" if i >= first else "full_attention" for i in range(config.n_layers)]
    return with_window(config, hf.get("sliding_window"), types)


def qwen2_config(hf: dict) -> ModelConfig:
    """Qwen2 and Qwen2.5: Llama's design, with biases on the query, key and value projections
    (none on the output projection); the weights are named as Llama's."""
    config = llama_config({**hf, "attention_bias": False})
    return qwen_window(dataclasses.replace(config, family="qwen2", qkv_bias=True, out_bias=False), hf)


def qwen3_config(hf: dict) -> ModelConfig:
    """Qwen3: Qwen2 without the q/k/v biases, with an RMSNorm on each head's query and key, and a
    head size of its own (not d_model / heads)."""
    return qwen_window(dataclasses.replace(llama_config(hf), family="qwen3", qk_norm=True), hf)


def mistral_config(hf: dict) -> ModelConfig:
    """Mistral: Llama's design with a sliding attention window on every layer."""
    return with_window(dataclasses.replace(llama_config(hf), family="mistral"), hf.get("sliding_window"))


def phi3_config(hf: dict) -> ModelConfig:
    """Phi-3 (and Phi-4-mini): Llama's design, its query/key/value and gate/up projections each
    stored as one matrix; rotary on all of each head, or on its first part (partial_rotary_factor)."""
    rope = hf.get("rope_parameters") or {}
    partial = rope.get("partial_rotary_factor", hf.get("partial_rotary_factor")) or 1.0
    config = llama_config(hf)
    config = dataclasses.replace(config, family="phi3", rotary_dim=int(config.head_dim * partial))
    return with_window(config, hf.get("sliding_window"))


def phi3_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """The fused matrices split into Llama's names: qkv_proj (q rows, then k, then v) and
    gate_up_proj (gate rows, then up)."""
    q_rows, kv_rows = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    split = {}
    for name, w in hf_state.items():
        if name.endswith("self_attn.qkv_proj.weight"):
            base = name.removesuffix("qkv_proj.weight")
            q, k, v = w.split([q_rows, kv_rows, kv_rows])
            split |= {f"{base}q_proj.weight": q, f"{base}k_proj.weight": k, f"{base}v_proj.weight": v}
        elif name.endswith("mlp.gate_up_proj.weight"):
            base = name.removesuffix("gate_up_proj.weight")
            gate, up = w.split([config.d_ff, config.d_ff])
            split |= {f"{base}gate_proj.weight": gate, f"{base}up_proj.weight": up}
        else:
            split[name] = w
    return llama_weights(split, config)


# ---------------------------------------------------------------- Gemma 3
def gemma3_config(hf: dict) -> ModelConfig:
    """Gemma 3 (text): Llama's parts rearranged. A norm before and after each sublayer, q/k norms,
    GeGLU (tanh GELU), embeddings scaled by sqrt(d_model), scores scaled by
    1/sqrt(query_pre_attn_scalar), and sliding-window layers between global ones, rotating with
    a base of their own."""
    for setting in ("final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention"):
        if hf.get(setting):
            raise ModelLoadError(f"this gemma3_text model sets {setting}, not supported yet")
    rope = hf.get("rope_parameters") or {}
    full, local = rope.get("full_attention") or {}, rope.get("sliding_attention") or {}
    scaling = hf.get("rope_scaling") or {}
    for params in (full, local, scaling):
        if params.get("rope_type", params.get("type", "default")) != "default":
            raise ModelLoadError(f"RoPE scaling {params.get('rope_type', params.get('type'))!r} is not supported")
    base = llama_config({**hf, "hidden_act": hf.get("hidden_activation", "gelu_pytorch_tanh"), "rope_parameters": {}})
    n_layers, pattern = base.n_layers, hf.get("sliding_window_pattern", 6)
    types = hf.get("layer_types") or [
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)
    ]  # transformers' default: every sixth layer global
    config = dataclasses.replace(
        base, family="gemma3_text", qk_norm=True, sandwich_norm=True, scale_embeddings=True,
        attn_scale=float(hf.get("query_pre_attn_scalar", 256)) ** -0.5,
        rope_theta=float(full.get("rope_theta", hf.get("rope_theta", 1_000_000.0))),
        rope_local_theta=float(local.get("rope_theta", hf.get("rope_local_base_freq", 10_000.0))),
        tie_embeddings=hf.get("tie_word_embeddings", True), pad_token_id=hf.get("pad_token_id", 0),
    )  # fmt: skip
    return with_window(config, hf.get("sliding_window", 4096), types)


GEMMA3_NORM_NAMES = {
    "input_layernorm": "self_attn_norm",
    "post_attention_layernorm": "self_attn_norm_after",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "ffn_norm_after",
    "self_attn.q_norm": "self_attn.q_norm",
    "self_attn.k_norm": "self_attn.k_norm",
}


def gemma3_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Gemma's RMSNorm multiplies by (1 + weight): the stored weights get their 1 added here, so
    our RMSNorm (times weight) computes the same."""
    renamed: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        name = name.replace("model.language_model.", "model.")  # saved from the multimodal class
        if name == "model.norm.weight":
            renamed["decoder.final_norm.weight"] = w.float() + 1
        elif (m := re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.weight", name)) and m[2] in GEMMA3_NORM_NAMES:
            renamed[f"decoder.layers.{m[1]}.{GEMMA3_NORM_NAMES[m[2]]}.weight"] = w.float() + 1
        else:
            renamed |= llama_weights({name: w}, config)
    return renamed


# ---------------------------------------------------------------- GPT-NeoX (Pythia)
def gpt_neox_config(hf: dict) -> ModelConfig:
    """GPT-NeoX and Pythia: attention and feed-forward side by side on the same input (parallel
    residual), rotary positions on part of each head, LayerNorm, GELU, biases."""
    rope = hf.get("rope_parameters") or {}
    if rope.get("rope_type", "default") not in ("default", None):
        raise ModelLoadError(f"RoPE scaling {rope['rope_type']!r} is not supported; only plain RoPE is")
    partial = rope.get("partial_rotary_factor", hf.get("rotary_pct")) or 1.0
    d, heads = hf["hidden_size"], hf["num_attention_heads"]
    bias = hf.get("attention_bias", True)
    return ModelConfig(
        family="gpt_neox", vocab_size=hf["vocab_size"], d_model=d, n_layers=hf["num_hidden_layers"], n_heads=heads,
        d_ff=hf["intermediate_size"], max_positions=hf["max_position_embeddings"], norm="layer",
        norm_eps=hf.get("layer_norm_eps", 1e-5), positions="rope",
        rope_theta=float(rope.get("rope_theta", hf.get("rotary_emb_base") or 10000.0)),
        rotary_dim=int(d // heads * partial), parallel_residual=hf.get("use_parallel_residual", True),
        activation=_activation(hf.get("hidden_act", "gelu")), qkv_bias=bias, out_bias=bias,
        tie_embeddings=hf.get("tie_word_embeddings", False), bos_token_id=hf.get("bos_token_id"),
        eos_token_id=_first(hf.get("eos_token_id")),
    )  # fmt: skip


GPT_NEOX_LAYER_NAMES = {
    "input_layernorm": "self_attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "attention.dense": "self_attn.o_proj",
    "mlp.dense_h_to_4h": "ffn.up_proj",
    "mlp.dense_4h_to_h": "ffn.down_proj",
}


def gpt_neox_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """query_key_value holds, head by head, that head's query, key and value rows: split it."""
    out: dict[str, torch.Tensor] = {}
    heads, hd = config.n_heads, config.head_dim
    for name, w in hf_state.items():
        name = name.removeprefix("gpt_neox.")
        if name == "embed_in.weight":
            out["embed_tokens.weight"] = w
        elif name.startswith("final_layer_norm."):
            out["decoder.final_norm." + name.rsplit(".", 1)[1]] = w
        elif name in ("embed_out.weight", "lm_head.weight"):
            if not config.tie_embeddings:
                out["lm_head.weight"] = w
        elif m := re.fullmatch(r"layers\.(\d+)\.(.+)\.(weight|bias)", name):
            layer, module, kind = f"decoder.layers.{m[1]}", m[2], m[3]
            if module == "attention.query_key_value":
                by_head = w.reshape(heads, 3, hd, *w.shape[1:])  # (heads, q/k/v, hd[, d_model])
                for i, proj in enumerate(("q_proj", "k_proj", "v_proj")):
                    out[f"{layer}.self_attn.{proj}.{kind}"] = by_head[:, i].reshape(heads * hd, *w.shape[1:])
            elif module in GPT_NEOX_LAYER_NAMES:
                out[f"{layer}.{GPT_NEOX_LAYER_NAMES[module]}.{kind}"] = w
            elif module not in ("attention.bias", "attention.masked_bias"):
                raise ModelLoadError(f"unexpected GPT-NeoX weight {name!r}")
        elif not name.endswith(("rotary_emb.inv_freq", "attention.bias", "attention.masked_bias")):
            raise ModelLoadError(f"unexpected GPT-NeoX weight {name!r}")
    return out


# ---------------------------------------------------------------- OPT
OPT_POSITION_OFFSET = 2  # OPT's position table starts two rows early (a padding convention)


def opt_config(hf: dict) -> ModelConfig:
    """OPT: GPT-2's design (learned positions, LayerNorm, biases everywhere) with ReLU, separate
    q/k/v matrices and a position table offset by two rows."""
    d = hf["hidden_size"]
    if hf.get("word_embed_proj_dim", d) != d:
        raise ModelLoadError(
            f"this opt model projects its {hf['word_embed_proj_dim']}-wide embeddings in and out "
            "(word_embed_proj_dim), not supported yet"
        )
    if not hf.get("layer_norm_elementwise_affine", True):
        raise ModelLoadError(
            "this opt model's norms have no weights (layer_norm_elementwise_affine), not supported yet"
        )
    pre_norm, bias = hf.get("do_layer_norm_before", True), hf.get("enable_bias", True)
    return ModelConfig(
        family="opt", vocab_size=hf["vocab_size"], d_model=d, n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"], d_ff=hf["ffn_dim"], max_positions=hf["max_position_embeddings"],
        norm="layer", norm_eps=1e-5, norm_first=pre_norm,
        final_norm=pre_norm and not hf.get("_remove_final_layer_norm", False), positions="learned",
        activation=_activation(hf.get("activation_function", "relu")), qkv_bias=bias, out_bias=bias, ffn_bias=bias,
        tie_embeddings=hf.get("tie_word_embeddings", True), bos_token_id=hf.get("bos_token_id"),
        eos_token_id=hf.get("eos_token_id"), pad_token_id=hf.get("pad_token_id"),
    )  # fmt: skip


def opt_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Its layers are named as Marian's; the position table loses its first two rows."""
    out: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        name = name.removeprefix("model.")
        if name == "decoder.embed_tokens.weight":
            out["embed_tokens.weight"] = w
        elif name == "decoder.embed_positions.weight":
            out["decoder.embed.positions.weight"] = w[OPT_POSITION_OFFSET:]
        elif name.startswith("decoder.final_layer_norm."):
            out["decoder.final_norm." + name.rsplit(".", 1)[1]] = w
        elif name == "lm_head.weight":
            if not config.tie_embeddings:
                out["lm_head.weight"] = w
        elif (m := re.fullmatch(r"decoder\.layers\.(\d+)\.(.+)\.(weight|bias)", name)) and m[2] in MARIAN_LAYER_NAMES:
            out[f"decoder.layers.{m[1]}.{MARIAN_LAYER_NAMES[m[2]]}.{m[3]}"] = w
        else:
            raise ModelLoadError(f"unexpected OPT weight {name!r}")
    return out


# ---------------------------------------------------------------- Marian
def marian_config(hf: dict) -> ModelConfig:
    if hf.get("encoder_attention_heads") != hf.get("decoder_attention_heads"):
        raise ModelLoadError("encoder and decoder with different head counts are not supported")
    if hf.get("encoder_ffn_dim") != hf.get("decoder_ffn_dim"):
        raise ModelLoadError("encoder and decoder with different feed-forward widths are not supported")
    if not hf.get("share_encoder_decoder_embeddings", True):
        raise ModelLoadError("Marian models with separate source and target vocabularies are not supported")
    return ModelConfig(
        family="marian",
        vocab_size=hf.get("decoder_vocab_size") or hf["vocab_size"],
        d_model=hf["d_model"],
        n_layers=hf["decoder_layers"],
        n_encoder_layers=hf["encoder_layers"],
        is_encoder_decoder=True,
        n_heads=hf["decoder_attention_heads"],
        d_ff=hf["decoder_ffn_dim"],
        max_positions=hf["max_position_embeddings"],
        norm="layer",
        norm_eps=1e-5,
        norm_first=bool(hf.get("normalize_before", False)),
        final_norm=False,
        positions="sinusoidal",
        activation=_activation(hf.get("activation_function", "swish")),
        scale_embeddings=hf.get("scale_embedding", True),
        final_logits_bias=True,
        tie_embeddings=hf.get("tie_word_embeddings", True),
        bos_token_id=hf.get("bos_token_id"),
        eos_token_id=_first(hf.get("eos_token_id")),
        pad_token_id=hf.get("pad_token_id"),
        decoder_start_token_id=hf.get("decoder_start_token_id", hf.get("pad_token_id")),
    )


MARIAN_LAYER_NAMES = {
    "self_attn.q_proj": "self_attn.q_proj",
    "self_attn.k_proj": "self_attn.k_proj",
    "self_attn.v_proj": "self_attn.v_proj",
    "self_attn.out_proj": "self_attn.o_proj",
    "self_attn_layer_norm": "self_attn_norm",
    "encoder_attn.q_proj": "cross_attn.q_proj",
    "encoder_attn.k_proj": "cross_attn.k_proj",
    "encoder_attn.v_proj": "cross_attn.v_proj",
    "encoder_attn.out_proj": "cross_attn.o_proj",
    "encoder_attn_layer_norm": "cross_attn_norm",
    "fc1": "ffn.up_proj",
    "fc2": "ffn.down_proj",
    "final_layer_norm": "ffn_norm",
}
MARIAN_EMBEDDING_NAMES = (
    "model.shared.weight",
    "model.encoder.embed_tokens.weight",
    "model.decoder.embed_tokens.weight",
)


def marian_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        if name in MARIAN_EMBEDDING_NAMES:
            out["embed_tokens.weight"] = w  # one table shared by encoder, decoder and head
        elif name.endswith("embed_positions.weight"):
            continue  # fixed sinusoids: our model computes them
        elif name == "final_logits_bias":
            out["final_logits_bias"] = w.reshape(-1)  # stored as (1, vocab)
        elif name == "lm_head.weight":
            # Tied checkpoints may store the shared table only under this name.
            out.setdefault("embed_tokens.weight" if config.tie_embeddings else "lm_head.weight", w)
        elif m := re.fullmatch(r"model\.(encoder|decoder)\.layers\.(\d+)\.(.+)\.(weight|bias)", name):
            if m[3] not in MARIAN_LAYER_NAMES:
                raise ModelLoadError(f"unexpected Marian weight {name!r}")
            out[f"{m[1]}.layers.{m[2]}.{MARIAN_LAYER_NAMES[m[3]]}.{m[4]}"] = w
        else:
            raise ModelLoadError(f"unexpected Marian weight {name!r}")
    return out


# ---------------------------------------------------------------- BART and mBART
def bart_config(hf: dict) -> ModelConfig:
    """BART: Marian's layout with learned positions (offset by two rows, as OPT's), a LayerNorm on
    the embeddings of each stack, GELU; post-norm. mBART: the same, pre-norm with a final norm
    in each stack, and embeddings scaled by sqrt(d_model)."""
    pre_norm = hf.get("model_type") == "mbart"
    defaults = {"activation_function": "gelu", "scale_embedding": False}
    config = marian_config({**defaults, **hf, "normalize_before": pre_norm})
    return dataclasses.replace(
        config, family=hf["model_type"], positions="learned", embedding_norm=True, final_norm=pre_norm,
        bos_token_id=hf.get("bos_token_id"), decoder_start_token_id=hf.get("decoder_start_token_id", 2),
    )  # fmt: skip


def bart_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Marian's names, plus each stack's position table (its first two rows dropped), its
    embedding norm and (mBART) its final norm."""
    out: dict[str, torch.Tensor] = {}
    layers: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        if m := re.fullmatch(r"model\.(encoder|decoder)\.embed_positions\.weight", name):
            out[f"{m[1]}.embed.positions.weight"] = w[OPT_POSITION_OFFSET:]
        elif m := re.fullmatch(r"model\.(encoder|decoder)\.layernorm_embedding\.(weight|bias)", name):
            out[f"{m[1]}.embed.norm.{m[2]}"] = w
        elif m := re.fullmatch(r"model\.(encoder|decoder)\.layer_norm\.(weight|bias)", name):
            out[f"{m[1]}.final_norm.{m[2]}"] = w
        else:
            layers[name] = w
    return marian_weights(layers, config) | out


# ---------------------------------------------------------------- T5
def t5_config(hf: dict) -> ModelConfig:
    """T5 and Flan-T5: relative position buckets added to the scores instead of position vectors,
    RMSNorm (no mean, no bias), no 1/sqrt(d) on the scores, no biases anywhere; ReLU, or gated
    GELU (T5 v1.1, Flan-T5). Original T5 shares its output head with the embeddings and scales
    the last residual by 1/sqrt(d_model) first."""
    proj = hf.get("feed_forward_proj", "relu")
    gated = proj.startswith("gated-")
    act = "gelu_new" if proj == "gated-gelu" else proj.removeprefix("gated-")
    scaled = hf.get("scale_decoder_outputs", hf.get("tie_word_embeddings", True) is not False)
    d = hf["d_model"]
    return ModelConfig(
        family="t5", vocab_size=hf["vocab_size"], d_model=d, n_layers=hf.get("num_decoder_layers") or hf["num_layers"],
        n_encoder_layers=hf["num_layers"], is_encoder_decoder=True, n_heads=hf["num_heads"], head_dim=hf["d_kv"],
        d_ff=hf["d_ff"], max_positions=hf.get("n_positions", 512), norm="rms",
        norm_eps=hf.get("layer_norm_epsilon", 1e-6), positions="relative",
        relative_buckets=hf.get("relative_attention_num_buckets", 32),
        relative_max_distance=hf.get("relative_attention_max_distance", 128), attn_scale=1.0,
        activation=_activation(act), gated_ffn=gated, qkv_bias=False, out_bias=False, ffn_bias=False,
        tie_embeddings=False, output_scale=d**-0.5 if scaled else 1.0, pad_token_id=hf.get("pad_token_id", 0),
        eos_token_id=_first(hf.get("eos_token_id", 1)),
        decoder_start_token_id=hf.get("decoder_start_token_id", hf.get("pad_token_id", 0)),
    )  # fmt: skip


T5_SUBLAYERS = {  # (stack, sublayer index) -> our sublayer
    ("encoder", "0"): "self_attn", ("encoder", "1"): "ffn",
    ("decoder", "0"): "self_attn", ("decoder", "1"): "cross_attn", ("decoder", "2"): "ffn",
}  # fmt: skip
T5_MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "wi": "up_proj", "wi_0": "gate_proj",
              "wi_1": "up_proj", "wo": "down_proj"}  # fmt: skip


def t5_weights(hf_state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """T5 names its sublayers by index (block.i.layer.j); the relative bias lives in block 0's
    self-attention and serves every layer of its stack. The output head is kept apart (tied
    checkpoints store only the shared table)."""
    out: dict[str, torch.Tensor] = {}
    for name, w in hf_state.items():
        if name in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
            out["embed_tokens.weight"] = w
            out.setdefault("lm_head.weight", w)
        elif name == "lm_head.weight":
            out["lm_head.weight"] = w
        elif m := re.fullmatch(r"(encoder|decoder)\.final_layer_norm\.weight", name):
            out[f"{m[1]}.final_norm.weight"] = w
        elif m := re.fullmatch(
            r"(encoder|decoder)\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.weight", name
        ):
            out[f"{m[1]}.relative.table.weight"] = w
        elif (m := re.fullmatch(r"(encoder|decoder)\.block\.(\d+)\.layer\.(\d)\.(.+)\.weight", name)) and (
            sublayer := T5_SUBLAYERS.get((m[1], m[3]))
        ):
            layer, module = f"{m[1]}.layers.{m[2]}", m[4]
            if module == "layer_norm":
                out[f"{layer}.{sublayer}_norm.weight"] = w
            elif (kind := module.rsplit(".", 1)[-1]) in T5_MODULES:
                out[f"{layer}.{sublayer}.{T5_MODULES[kind]}.weight"] = w
            else:
                raise ModelLoadError(f"unexpected T5 weight {name!r}")
        else:
            raise ModelLoadError(f"unexpected T5 weight {name!r}")
    return out


FAMILIES = {
    "gpt2": (gpt2_config, gpt2_weights),
    "llama": (llama_config, llama_weights),
    "qwen2": (qwen2_config, llama_weights),
    "qwen3": (qwen3_config, llama_weights),
    "mistral": (mistral_config, llama_weights),
    "phi3": (phi3_config, phi3_weights),
    "opt": (opt_config, opt_weights),
    "gpt_neox": (gpt_neox_config, gpt_neox_weights),
    "gemma3_text": (gemma3_config, gemma3_weights),
    "marian": (marian_config, marian_weights),
    "bart": (bart_config, bart_weights),
    "mbart": (bart_config, bart_weights),
    "t5": (t5_config, t5_weights),
}


def convert(hf_config: dict, hf_state: dict[str, torch.Tensor]) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    family = hf_config.get("model_type")
    if family not in FAMILIES:
        raise ModelLoadError(
            f"model type {family!r} is not supported; the explorer reads {', '.join(sorted(FAMILIES))} checkpoints"
        )
    make_config, rename = FAMILIES[family]
    try:
        config = make_config(ConfigJson(hf_config))
    except (TypeError, ValueError) as error:
        # A value of the wrong kind ("n_layer": "twelve") cannot be told from a bug in the
        # function that read it: the user hears the first, the log gets the traceback.
        log.exception("reading a %s config.json failed: a malformed file, or a bug in %s", family, make_config.__name__)
        raise ModelLoadError(f"this {family} config.json is malformed ({type(error).__name__}: {error})") from error
    return config, rename(hf_state, config)


class MissingConfigField(ModelLoadError):
    """A field a family's config.json must have is not there."""


class ConfigJson(dict):
    """A checkpoint's config.json: a missing field is the file's fault, said as such. (A KeyError
    from anything else, a bug, stays a KeyError and reaches the log.)"""

    def __missing__(self, key):
        raise MissingConfigField(f"this {self.get('model_type')} config.json is incomplete: it has no {key!r}")


def _first(value):
    """Some configs give several end tokens; the explorer stops at the first."""
    return value[0] if isinstance(value, list) else value
