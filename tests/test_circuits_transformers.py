"""The QK decomposition written again here from transformers' own tensors, on four tiny families.

Independent of explorer/model: the residual stream's components come from transformers' hidden
states and per-head outputs (a hook on each layer's output projection's input, and one on each
MLP's output), its norms, q/k norms, rotary cos/sin (a hook on each attention's arguments) and
score scale; the pair values must equal ``why_attends``'s to 1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer

TEXT = "The quick brown fox: def add(a, b) in 2017."
LAYER = 2


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class Captured:
    """What transformers' layers computed: each o_proj's input, each MLP's output, each attention's rotary."""

    def __init__(self, layers, family: str) -> None:
        self.z, self.mlp, self.rotary, self.attn_out, self.hooks = {}, {}, {}, {}, []
        for i, layer in enumerate(layers):
            attn = layer.attn if family == "gpt2" else layer.self_attn
            out_proj = attn.c_proj if family == "gpt2" else attn.o_proj
            self.hooks.append(out_proj.register_forward_pre_hook(self._keep(self.z, i, lambda args: args[0])))
            self.hooks.append(out_proj.register_forward_hook(self._keep(self.attn_out, i, lambda out: out, True)))
            mlp_out = layer.post_feedforward_layernorm if family == "gemma3_text" else layer.mlp
            self.hooks.append(mlp_out.register_forward_hook(self._keep(self.mlp, i, lambda out: out, True)))
            if family != "gpt2":
                self.hooks.append(attn.register_forward_pre_hook(self._rotary(i), with_kwargs=True))

    @staticmethod
    def _keep(store, i, pick, output=False):
        if output:
            return lambda module, args, out: store.__setitem__(i, pick(out)[0].detach())
        return lambda module, args: store.__setitem__(i, pick(args)[0].detach())

    def _rotary(self, i):
        def hook(module, args, kwargs):
            self.rotary[i] = kwargs["position_embeddings"]

        return hook


def stream_components(ref, family: str, captured: Captured, hidden: tuple, n_heads: int, head_dim: int):
    """The stream entering layer LAYER, (names, (C, T, d)), written from transformers' tensors."""
    names, parts = ["embed"], [hidden[0][0]]
    layers = ref.transformer.h if family == "gpt2" else ref.model.layers
    bias = torch.zeros_like(hidden[0][0])
    for i in range(LAYER):
        attn = layers[i].attn if family == "gpt2" else layers[i].self_attn
        z = captured.z[i].view(-1, n_heads, head_dim)  # (T, heads, hd)
        if family == "gpt2":  # Conv1D: y = x W + b, W (d_in, d_out)
            w_o = attn.c_proj.weight.view(n_heads, head_dim, -1)  # (heads, hd, d)
            heads = torch.einsum("the,hed->htd", z, w_o)
            bias = bias + attn.c_proj.bias
        else:
            w_o = attn.o_proj.weight.view(-1, n_heads, head_dim)  # (d, heads, hd)
            heads = torch.einsum("the,dhe->htd", z, w_o)
        if family == "gemma3_text":  # the norm after attention, its scale held at the whole output's
            post = layers[i].post_attention_layernorm
            heads = heads * rms(captured.attn_out[i], post.eps) * (1 + post.weight)
        names += [f"L{i}.H{h}" for h in range(n_heads)] + [f"L{i}.mlp"]
        parts += [*heads, captured.mlp[i]]
    if family == "gpt2":  # the only one of the four with output biases (and LayerNorm's beta)
        names.append("bias")
        parts.append(bias)
    return names, torch.stack(parts)


def normed(ref, family: str, names: list[str], parts: torch.Tensor, total: torch.Tensor):
    """The parts through layer LAYER's input norm, its scale held at the stream's."""
    layers = ref.transformer.h if family == "gpt2" else ref.model.layers
    if family == "gpt2":
        ln = layers[LAYER].ln_1
        scale = torch.rsqrt(total.var(-1, unbiased=False, keepdim=True) + ln.eps)
        parts = (parts - parts.mean(-1, keepdim=True)) * scale * ln.weight
        parts[names.index("bias")] += ln.bias
        return parts
    norm = layers[LAYER].input_layernorm
    weight = (1 + norm.weight) if family == "gemma3_text" else norm.weight
    return parts * rms(total, norm.variance_epsilon if hasattr(norm, "variance_epsilon") else norm.eps) * weight


def projected(ref, family, captured, names, parts, which: str, head: int, n_heads: int, head_dim: int):
    """(names, (C, T, hd)): the parts through W_Q or W_K of the head, its bias, q/k norm, rotary."""
    layers = ref.transformer.h if family == "gpt2" else ref.model.layers
    attn = layers[LAYER].attn if family == "gpt2" else layers[LAYER].self_attn
    d = parts.shape[-1]
    if family == "gpt2":
        offset = 0 if which == "q" else d
        weight = attn.c_attn.weight[:, offset : offset + d].view(d, n_heads, head_dim)[:, head]  # (d, hd)
        out = parts @ weight
        bias = attn.c_attn.bias[offset : offset + d].view(n_heads, head_dim)[head]
        return [*names, f"{which} bias"], torch.cat([out, bias.expand(1, *out.shape[1:])])
    proj = attn.q_proj if which == "q" else attn.k_proj
    out = parts @ proj.weight.view(-1, head_dim, d)[head].T  # (C, T, hd)
    names = list(names)
    if proj.bias is not None:
        out = torch.cat([out, proj.bias.view(-1, head_dim)[head].expand(1, *out.shape[1:])])
        names.append(f"{which} bias")
    if family == "gemma3_text":
        norm = attn.q_norm if which == "q" else attn.k_norm
        out = out * rms(out.sum(0), norm.eps) * (1 + norm.weight)
    cos, sin = captured.rotary[LAYER]  # (1, T, hd)
    from transformers.models.llama.modeling_llama import rotate_half

    return names, out * cos[0] + rotate_half(out) * sin[0]


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2", "gemma3_text"])
def test_pairs_equal_a_decomposition_from_transformers_own_tensors(checkpoints, family):
    from transformers import AutoModelForCausalLM

    folder = checkpoints[family]
    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    loaded = explorer.load_model(str(folder))
    config = loaded.config
    session = explorer.GenerationSession(loaded, TEXT)
    ids = torch.tensor([session.token_ids])
    layers = ref.transformer.h if family == "gpt2" else ref.model.layers
    captured = Captured(layers, family)
    with torch.no_grad():
        hidden = ref(ids, output_hidden_states=True).hidden_states
        names, parts = stream_components(ref, family, captured, hidden, config.n_heads, config.head_dim)
        assert (parts.sum(0) - hidden[LAYER][0]).abs().max() <= 1e-4 * hidden[LAYER][0].abs().max()
        parts = normed(ref, family, names, parts, hidden[LAYER][0])
        head, kv_head = config.n_heads - 1, (config.n_heads - 1) // config.queries_per_kv_head
        q_names, q = projected(ref, family, captured, names, parts, "q", head, config.n_heads, config.head_dim)
        k_names, k = projected(ref, family, captured, names, parts, "k", kv_head, config.n_heads, config.head_dim)
    attn = layers[LAYER].attn if family == "gpt2" else layers[LAYER].self_attn
    scale = config.head_dim**-0.5 if family == "gpt2" else attn.scaling
    query = ids.shape[1] - 1
    window = config.window_of(LAYER)
    for key in range(0 if window is None else query - window + 1, query + 1):
        expected = (scale * q[:, query] @ k[:, key].T).double().numpy()  # (Cq, Ck)
        cell = explorer.why_attends(session, LAYER, head, query, key)
        ours = cell.pairs[
            np.ix_([cell.query_names.index(n) for n in q_names], [cell.key_names.index(n) for n in k_names])
        ]
        assert sorted(cell.query_names) == sorted(q_names) and sorted(cell.key_names) == sorted(k_names)
        assert np.abs(ours - expected).max() <= 1e-4 * max(np.abs(expected).max(), 1e-3)
    for hook in captured.hooks:
        hook.remove()
