"""Cache policies (issue 29) against transformers as the oracle.

The reference below is written apart from explorer/model/cache_policy.py: it steps transformers'
own model one token at a time, keeps its own list of which position each cached entry holds, picks
the entry to drop by the paper's rule from what transformers computed (its attention weights for
H2O, its cached keys for key norm), and cuts transformers' cache to the same entries before the
next token. Our session must hold the same positions and give the same logits.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import explorer
from explorer import cache_policies as cp
from explorer.model.policy_cache import PolicyCache

PROMPT = "Attention sinks keep the first tokens: a window alone forgets them, and the text goes astray."
N_STEPS = 24


def hf_model(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()


def reference_victim(policy, positions: list[int], scores: list[float], norms: list[float], new: int) -> int:
    """The index (in transformers' cache order) of the entry the paper's rule drops for position ``new``."""
    candidates = range(len(positions))
    if isinstance(policy, cp.Window):  # the oldest
        return min(candidates, key=lambda i: positions[i])
    if isinstance(policy, cp.Sinks):  # the oldest past the sinks
        return min((i for i in candidates if positions[i] >= policy.sinks), key=lambda i: positions[i])
    if isinstance(policy, cp.HeavyHitters):  # least attention received, outside the last R positions
        return min((i for i in candidates if positions[i] <= new - policy.recent), key=lambda i: scores[i])
    if isinstance(policy, cp.KeyNorm):  # the largest key; of keys equal in norm (to 1e-5), the oldest
        largest = max(norms)
        return min((i for i in candidates if norms[i] >= largest * (1 - 1e-5)), key=lambda i: positions[i])
    raise AssertionError(policy)


class Reference:
    """transformers' model stepped a token at a time, its cache cut by the reference rule."""

    def __init__(self, model, policy, n_layers: int, kv_heads: int) -> None:
        from transformers import DynamicCache

        self.model, self.policy, self.cache = model, policy, DynamicCache()
        self.positions = [[[] for _ in range(kv_heads)] for _ in range(n_layers)]  # per layer, per kv head
        self.scores = [[[] for _ in range(kv_heads)] for _ in range(n_layers)]
        self.history: dict[int, list[torch.Tensor]] = {}  # position -> its rows, per layer

    @torch.no_grad()
    def step(self, token: int, position: int) -> torch.Tensor:
        """Process ``token`` at ``position``; returns the next-token logits (vocab,)."""
        if self.positions[0][0] and len(self.positions[0][0]) == self.policy.budget:
            self._cut(position)
        out = self.model(
            input_ids=torch.tensor([[token]]), cache=self.cache, position_ids=torch.tensor([[position]]),
            cache_position=torch.tensor([position]), output_attentions=True, use_cache=True,
        )  # fmt: skip
        self.rows = []  # per layer (heads, position + 1): this query's weights put at the keys' positions
        for layer, probs in enumerate(out.attentions):  # (1, heads, 1, held)
            heads_per_kv = probs.shape[1] // len(self.positions[layer])
            row = torch.zeros(probs.shape[1], position + 1)
            for h, held in enumerate(self.positions[layer]):
                held.append(position)
                group = slice(h * heads_per_kv, (h + 1) * heads_per_kv)
                row[group, held] = probs[0, group, 0]
            self.rows.append(row)
            self.history[position] = self.rows
            for h, scores in enumerate(self.scores[layer]):
                scores.append(0.0)
                received = probs[0, h * heads_per_kv : (h + 1) * heads_per_kv, 0].sum(0)  # summed over the group
                for i in range(len(scores)):
                    scores[i] += float(received[i])
        return out.logits[0, -1]

    def _cut(self, new: int) -> None:
        for layer, cached in enumerate(self.cache.layers):
            norms = cached.keys[0].norm(dim=-1)  # (kv_heads, held)
            keep_keys, keep_values = [], []
            for h, (held, scores) in enumerate(zip(self.positions[layer], self.scores[layer], strict=True)):
                drop = reference_victim(self.policy, held, scores, norms[h].tolist(), new)
                kept = [i for i in range(len(held)) if i != drop]
                keep_keys.append(cached.keys[0, h, kept])
                keep_values.append(cached.values[0, h, kept])
                del held[drop], scores[drop]
            cached.keys, cached.values = torch.stack(keep_keys)[None], torch.stack(keep_values)[None]


POLICIES = {
    "window": cp.window(12),
    "sinks": cp.sinks(3, 9),
    "heavy_hitters": cp.heavy_hitters(6, 6),
    "key_norm": cp.key_norm(12),
}


@pytest.mark.parametrize("family", ["llama", "gpt2", "qwen2", "gpt_neox"])
@pytest.mark.parametrize("name", list(POLICIES))
def test_a_policy_keeps_what_the_paper_keeps_and_gives_transformers_logits(checkpoints, family, name):
    policy = POLICIES[name]
    loaded = explorer.load_model(str(checkpoints[family]), progress=False)
    session = explorer.GenerationSession(loaded, PROMPT, cache_policy=policy)
    c = loaded.config
    reference = Reference(hf_model(checkpoints[family]), policy, c.n_layers, c.n_kv_heads)
    for position, token in enumerate(session.token_ids):
        logits = reference.step(token, position)
    for _ in range(N_STEPS):
        assert (session.next_logits() - logits).abs().max() <= 1e-4
        token = session.step().token_id
        logits = reference.step(token, len(session.token_ids) - 1)
        for layer in range(c.n_layers):
            held = session.cache.held_positions(layer)  # (kv_heads, held)
            expected = [sorted(p) for p in reference.positions[layer]]
            assert [sorted(row) for row in held.tolist()] == expected
    # The heatmaps show what the model computed: each query's row over the keys its cache held.
    n = len(session.token_ids)
    for layer in range(c.n_layers):
        shown = session.self_attention(layer)  # (heads, T, T)
        expected = np.stack(
            [np.pad(reference.history[i][layer].numpy(), ((0, 0), (0, n - i - 1))) for i in range(n)], 1
        )
        assert np.abs(shown - expected).max() <= 1e-5
        evicted = session.evicted(layer).repeat(c.n_heads // c.n_kv_heads, axis=0)  # (heads, T, T)
        assert evicted.any() and (shown[evicted] == 0).all()
    assert session.cache_bytes == 2 * c.n_layers * c.n_kv_heads * c.head_dim * policy.budget * 4
    # The policy did evict: some head, in some layer, no longer holds what a window would.
    assert len(session.token_ids) > policy.budget + 20


# ---------------------------------------------------------------- sliding-window layers (Gemma 3, Mistral)


@pytest.fixture(scope="module")
def sliding(checkpoints, tmp_path_factory):
    """Models with sliding layers: Gemma 3 with a window of 6 (under the budgets below: the policy
    evicts on its global layers only) and of 16 (over them: on both kinds), Mistral (every layer
    sliding) with a window of 16."""
    from tests import builders

    root = tmp_path_factory.mktemp("sliding")
    return {
        "gemma3_w6": checkpoints["gemma3_text"],
        "gemma3_w16": builders.tiny_gemma3(root / "gemma3-w16", window=16),
        "mistral_w16": builders.tiny_mistral(root / "mistral-w16", window=16),
    }


class SlidingReference:
    """transformers' model stepped a token at a time. Its cache is never cut: each layer's
    attention is handed a mask (through a pre-hook on the layer) that hides every entry the
    reference does not hold, which eager attention turns into exactly zero weight, as a cut would.
    Per layer and key/value head the reference holds a set of positions: a sliding layer first lets
    go what its window has passed (position <= new - window), then, if the head still holds the
    budget, the paper's rule drops one (``reference_victim``); a global layer only the second."""

    def __init__(self, model, policy, windows: list[int | None], kv_heads: int) -> None:
        from transformers import DynamicCache

        self.model, self.policy, self.windows, self.cache = model, policy, windows, DynamicCache()
        self.held = [[[] for _ in range(kv_heads)] for _ in windows]  # per layer, per kv head: positions
        self.scores = [[{} for _ in range(kv_heads)] for _ in windows]  # position -> attention received
        self.history: dict[int, list[torch.Tensor]] = {}  # position -> its rows, per layer
        self.masks: list[torch.Tensor | None] = [None] * len(windows)
        self.hooks = [
            block.self_attn.register_forward_pre_hook(self._masking(layer), with_kwargs=True)
            for layer, block in enumerate(model.model.layers)
        ]

    def remove_hooks(self) -> None:
        for hook in self.hooks:
            hook.remove()

    def _masking(self, layer: int):
        def hook(module, args, kwargs):  # before the first step (a prompt's pass): transformers' own mask
            return (
                (args, kwargs) if self.masks[layer] is None else (args, {**kwargs, "attention_mask": self.masks[layer]})
            )

        return hook

    def evicts(self) -> bool:
        return self.policy.budget is not None and not self.policy.prefill_press

    def _let_go(self, position: int) -> None:
        for layer, window in enumerate(self.windows):
            for h, held in enumerate(self.held[layer]):
                if window is not None:
                    held[:] = [p for p in held if p > position - window]
                if self.evicts() and len(held) == self.policy.budget:
                    keys = self.cache.layers[layer].keys[0, h]  # (positions so far, hd): position = column
                    scores = [self.scores[layer][h][p] for p in held]
                    norms = [float(keys[p].norm()) for p in held]
                    del held[reference_victim(self.policy, held, scores, norms, position)]

    @torch.no_grad()
    def step(self, token: int, position: int) -> torch.Tensor:
        """Process ``token`` at ``position``; returns the next-token logits (vocab,)."""
        self._let_go(position)
        heads = self.model.config.num_attention_heads
        for layer, held in enumerate(self.held):
            group = heads // len(held)
            mask = torch.full((1, heads, 1, position + 1), float("-inf"))
            for h, positions in enumerate(held):
                positions.append(position)
                mask[0, h * group : (h + 1) * group, 0, positions] = 0.0
            self.masks[layer] = mask
        out = self.model(
            input_ids=torch.tensor([[token]]), cache=self.cache, position_ids=torch.tensor([[position]]),
            output_attentions=True, use_cache=True,
        )  # fmt: skip
        rows = []
        for layer, probs in enumerate(out.attentions):  # (1, heads, 1, position + 1)
            rows.append(probs[0, :, 0].clone())
            group = probs.shape[1] // len(self.held[layer])
            for h, held in enumerate(self.held[layer]):
                received = probs[0, h * group : (h + 1) * group, 0].sum(0)  # summed over the GQA group
                for p in held:
                    self.scores[layer][h][p] = self.scores[layer][h].get(p, 0.0) + float(received[p])
        self.history[position] = rows
        return out.logits[0, -1]


def not_the_end(session) -> int:
    """The session's most likely next token that does not end the text, put at its end."""
    ranked = session.next_logits().argsort(descending=True).tolist()
    token = next(t for t in ranked[:2] if t != session.loaded.tokenizer.eos_token_id)
    session.force(token)
    return token


def sliding_model(folder):
    loaded = explorer.load_model(str(folder), progress=False)
    windows = [loaded.config.window_of(i) for i in range(loaded.config.n_layers)]
    assert any(w is not None for w in windows)
    return loaded, windows


@pytest.mark.parametrize("model", ["gemma3_w6", "gemma3_w16", "mistral_w16"])
@pytest.mark.parametrize("name", list(POLICIES))
def test_a_policy_on_sliding_layers_keeps_within_the_window_and_gives_transformers_logits(sliding, model, name):
    policy = POLICIES[name]
    loaded, windows = sliding_model(sliding[model])
    c = loaded.config
    session = explorer.GenerationSession(loaded, PROMPT, cache_policy=policy)
    reference = SlidingReference(hf_model(sliding[model]), policy, windows, c.n_kv_heads)
    for position, token in enumerate(session.token_ids):
        logits = reference.step(token, position)
    for _ in range(N_STEPS):
        assert (session.next_logits() - logits).abs().max() <= 1e-4
        token = not_the_end(session)
        logits = reference.step(token, len(session.token_ids) - 1)
        for layer in range(c.n_layers):
            held = session.cache.held_positions(layer)  # (kv_heads, slots); -1 where the window passed
            assert [sorted(p for p in row if p >= 0) for row in held.tolist()] == [
                sorted(p) for p in reference.held[layer]
            ]
    n = len(session.token_ids)
    for layer in range(c.n_layers):  # the heatmaps: each query's row over the keys its cache held
        shown = session.self_attention(layer)  # (heads, T, T)
        expected = np.stack(
            [np.pad(reference.history[i][layer].numpy(), ((0, 0), (0, n - i - 1))) for i in range(n)], 1
        )
        assert np.abs(shown - expected).max() <= 1e-5
    held_entries = sum(len(p) for layer in reference.held for p in layer)
    assert session.cache_bytes == 2 * held_entries * c.head_dim * 4  # a sliding layer: what its window reads
    # The policy did evict on the global layers, and, where its window is wider than the budget, on sliding ones.
    evicts = [session.evicted(layer).any() for layer in range(c.n_layers)]
    assert all(evicts[i] for i, w in enumerate(windows) if w is None or w > policy.budget)
    assert not any(evicts[i] for i, w in enumerate(windows) if w is not None and w <= policy.budget)


@pytest.mark.parametrize("model", ["gemma3_w6", "mistral_w16"])
def test_snapkv_on_sliding_layers_presses_within_the_window_as_kvpress_scores(sliding, model):

    policy = cp.snapkv(12, observe=4)
    loaded, windows = sliding_model(sliding[model])
    c = loaded.config
    session = explorer.GenerationSession(loaded, PROMPT, cache_policy=policy)
    hf = hf_model(sliding[model])
    reference = SlidingReference(hf, policy, windows, c.n_kv_heads)
    prompt = torch.tensor([session.token_ids])
    n = prompt.shape[1]
    with torch.no_grad():  # the prompt in one pass, under transformers' own masks
        out = hf(input_ids=prompt, cache=reference.cache, output_attentions=True, use_cache=True)
    for layer, (window, attentions) in enumerate(zip(windows, out.attentions, strict=True)):
        scores = kvpress_snapkv_scores(attentions, policy.observe, policy.kernel, c.n_kv_heads)[0]
        read = torch.arange(n) > n - 1 - (window or n)  # what the prompt's last query read
        kept = scores.masked_fill(~read, float("-inf")).topk(min(policy.size, int(read.sum())), dim=-1).indices
        reference.held[layer] = [sorted(row) for row in kept.tolist()]
        held = session.cache.held_positions(layer)
        assert [sorted(p for p in row if p >= 0) for row in held.tolist()] == reference.held[layer]
    logits = out.logits[0, -1]
    for _ in range(N_STEPS):
        assert (session.next_logits() - logits).abs().max() <= 1e-4
        token = not_the_end(session)
        logits = reference.step(token, len(session.token_ids) - 1)
    for layer in range(c.n_layers):
        held = session.cache.held_positions(layer)
        assert [sorted(p for p in row if p >= 0) for row in held.tolist()] == [sorted(p) for p in reference.held[layer]]


def kvpress_snapkv_scores(attentions: torch.Tensor, observe: int, kernel: int, kv_heads: int) -> torch.Tensor:
    """SnapKV's scores as kvpress's SnapKVPress.score writes them, from transformers' prompt
    attention (1, heads, T, T): (1, kv_heads, T)."""
    _, heads, n, _ = attentions.shape
    weights = attentions[..., -observe:, :-observe].mean(dim=-2)  # (1, heads, T - observe)
    weights = torch.nn.functional.avg_pool1d(weights, kernel_size=kernel, padding=kernel // 2, stride=1)
    weights = weights.view(1, kv_heads, heads // kv_heads, n - observe).mean(2)
    return torch.nn.functional.pad(weights, (0, observe), value=weights.max().item())


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_snapkv_presses_the_prompt_as_kvpress_does_and_gives_transformers_logits(checkpoints, family):
    from transformers import DynamicCache

    policy = cp.snapkv(12, observe=4)
    loaded = explorer.load_model(str(checkpoints[family]), progress=False)
    c = loaded.config
    session = explorer.GenerationSession(loaded, PROMPT, cache_policy=policy)
    model, cache = hf_model(checkpoints[family]), DynamicCache()
    prompt = torch.tensor([session.token_ids])
    with torch.no_grad():
        out = model(input_ids=prompt, cache=cache, output_attentions=True, use_cache=True)
    for layer, (cached, attentions) in enumerate(zip(cache.layers, out.attentions, strict=True)):
        scores = kvpress_snapkv_scores(attentions, policy.observe, policy.kernel, c.n_kv_heads)
        kept = scores.topk(policy.size, dim=-1).indices  # (1, kv_heads, kept): ScorerPress keeps the top scores
        index = kept[..., None].expand(-1, -1, -1, cached.keys.shape[-1])
        cached.keys, cached.values = cached.keys.gather(2, index), cached.values.gather(2, index)
        held = session.cache.held_positions(layer)
        assert [sorted(row) for row in held.tolist()] == [sorted(row) for row in kept[0].tolist()]
    logits = out.logits[0, -1]
    for _ in range(N_STEPS):
        assert (session.next_logits() - logits).abs().max() <= 1e-4
        position = len(session.token_ids)
        token = session.step().token_id
        with torch.no_grad():
            logits = model(
                input_ids=torch.tensor([[token]]), cache=cache, position_ids=torch.tensor([[position]]),
                cache_position=torch.tensor([position]), use_cache=True,
            ).logits[0, -1]  # fmt: skip
    assert session.cache.held_positions(0).shape[1] == policy.size + N_STEPS  # the cache grows after the press
    with pytest.raises(explorer.InputError, match="compresses a prompt once"):
        cp.perplexity(loaded, PROMPT, policy)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_positions_within_the_cache_are_streamingllms(checkpoints, family):
    """StreamingLLM's way: every held key is turned to its rank in the cache and the new token
    takes the last rank. The reference cuts transformers' cache and turns its keys itself, with
    transformers' own rotary embedding, by the change of each key's rank."""
    from transformers import DynamicCache
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    policy = cp.sinks(3, 9, cache_positions=True)
    loaded = explorer.load_model(str(checkpoints[family]), progress=False)
    session = explorer.GenerationSession(loaded, PROMPT, cache_policy=policy)
    model, cache = hf_model(checkpoints[family]), DynamicCache()
    held, ranks = [], []  # the positions held, in transformers' cache order, and the rank each key is turned to
    ids, n_prompt, logits = list(session.token_ids), len(session.token_ids), None
    for step in range(n_prompt + N_STEPS):
        if step >= n_prompt:  # the prompt read: each step's next-token logits against transformers'
            assert (session.next_logits() - logits).abs().max() <= 1e-4
            ids.append(session.step().token_id)
        if len(held) == policy.budget:  # the oldest past the sinks leaves; the others take their new ranks
            drop = min((i for i in range(len(held)) if held[i] >= policy.sinks), key=lambda i: held[i])
            kept = [i for i in range(len(held)) if i != drop]
            held = [held[i] for i in kept]
            new_ranks = sorted(range(len(held)), key=lambda i: held[i])
            new_ranks = [new_ranks.index(i) for i in range(len(held))]
            turn = torch.tensor([[r - ranks[i] for r, i in zip(new_ranks, kept, strict=True)]])
            for cached in cache.layers:
                keys, values = cached.keys[:, :, kept], cached.values[:, :, kept]
                cos, sin = model.model.rotary_emb(keys, turn)
                cached.keys, cached.values = apply_rotary_pos_emb(keys, keys, cos, sin)[1], values
            ranks = new_ranks
        rank = len(held)
        with torch.no_grad():
            logits = model(
                input_ids=torch.tensor([[ids[step]]]), cache=cache, position_ids=torch.tensor([[rank]]),
                cache_position=torch.tensor([rank]), use_cache=True,
            ).logits[0, -1]  # fmt: skip
        held.append(step)
        ranks.append(rank)
    assert sorted(session.cache.held_positions(0)[0].tolist()) == sorted(held)
    original = explorer.GenerationSession(loaded, PROMPT, cache_policy=cp.sinks(3, 9))
    original.replay(session.generated_ids)
    assert (original.next_logits() - session.next_logits()).abs().max() > 1e-3  # the positions matter
    with pytest.raises(explorer.InputError, match="no kept query and key"):
        session.self_attention(0)
    gpt2 = explorer.load_model(str(checkpoints["gpt2"]), progress=False)
    with pytest.raises(explorer.InputError, match="rotary models"):
        explorer.GenerationSession(gpt2, PROMPT, cache_policy=policy)


def equivalent_mask(policy, n: int) -> torch.Tensor:
    """(n, n) True where query i reads key j under a window or sinks + window."""
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    recent = (j <= i) & (j > i - (policy.size if isinstance(policy, cp.Window) else policy.window))
    return recent | ((j < policy.sinks) & (j <= i)) if isinstance(policy, cp.Sinks) else recent


@pytest.mark.parametrize("policy", [cp.window(10), cp.sinks(2, 8)], ids=["window", "sinks"])
def test_window_and_sinks_equal_a_full_pass_under_the_equivalent_mask(checkpoints, policy):
    """Teacher-forced log-probabilities under the policy (our cache, a token a pass once full)
    equal transformers' one parallel pass whose mask lets each query read what the cache holds."""
    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    ids = loaded.tokenizer(PROMPT * 2, add_special_tokens=False)["input_ids"][:80]
    ours = cp.token_log_probs(loaded, ids, policy)
    mask = equivalent_mask(policy, len(ids))
    float_mask = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))[None, None]  # (1, 1, T, T)
    with torch.no_grad():
        logits = hf_model(checkpoints["llama"])(torch.tensor([ids]), attention_mask=float_mask).logits[0]
    theirs = logits[:-1].log_softmax(-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    assert (ours - theirs).abs().max() <= 1e-4
    full = cp.token_log_probs(loaded, ids, cp.full())
    assert (ours[: policy.budget - 1] - full[: policy.budget - 1]).abs().max() <= 1e-4  # the same until it evicts
    assert (ours[policy.budget :] - full[policy.budget :]).abs().max() > 1e-3  # then not


# ---------------------------------------------------------------- quantization (KIVI)


def reference_quantize_dequantize(x: torch.Tensor, bits: int, over: int) -> torch.Tensor:
    """Min-max: q = round((x - min) / scale), scale = (max - min) / (2**bits - 1), both along ``over``."""
    low, high = x.amin(over, keepdim=True), x.amax(over, keepdim=True)
    scale = (high - low) / (2**bits - 1)
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return ((x - low) / scale).round().clamp(0, 2**bits - 1) * scale + low


@pytest.mark.parametrize("bits", [8, 4])
def test_a_quantized_cache_holds_the_keys_per_channel_and_the_values_per_token(bits):
    group, recent, kv_heads, head_dim, n = 4, 3, 2, 8, 19
    torch.manual_seed(0)
    keys, values = torch.randn(1, kv_heads, n, head_dim), torch.randn(1, kv_heads, n, head_dim)
    cache = PolicyCache(1, cp.quantized(bits, group, recent))
    for t in range(n):
        cache.append(0, keys[:, :, t : t + 1], values[:, :, t : t + 1])
    read = cache.append(0, keys[:, :, :0], values[:, :, :0])  # what a pass would read now
    stored = 16  # groups of 4 leave the tail while it holds recent + group: 19 - 16 = 3 stay in full
    expected_keys, expected_values = keys.clone(), values.clone()
    for g in range(0, stored, group):
        expected_keys[:, :, g : g + group] = reference_quantize_dequantize(keys[:, :, g : g + group], bits, over=2)
    by_token = values[:, :, :stored].reshape(1, kv_heads, stored, head_dim // group, group)
    expected_values[:, :, :stored] = reference_quantize_dequantize(by_token, bits, over=4).flatten(-2)
    assert torch.allclose(read.keys, expected_keys, atol=1e-6) and torch.allclose(
        read.values, expected_values, atol=1e-6
    )
    assert torch.equal(read.keys[:, :, stored:], keys[:, :, stored:])  # the recent ones exact
    assert not torch.equal(read.keys[:, :, :stored], keys[:, :, :stored])
    # Bytes: integers (two a byte at 4 bits), a scale and a minimum per group, the tail in float32.
    ints = 2 * kv_heads * stored * head_dim * bits // 8
    key_scales = 2 * kv_heads * (stored // group) * head_dim * 4
    value_scales = 2 * kv_heads * stored * (head_dim // group) * 4
    tail = 2 * kv_heads * (n - stored) * head_dim * 4
    assert cache.nbytes == ints + key_scales + value_scales + tail


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_under_a_window_holds_integers_per_token_and_the_recent_in_full(bits):
    group, recent, kv_heads, head_dim, n = 4, 3, 2, 8, 15
    torch.manual_seed(1)
    keys, values = torch.randn(1, kv_heads, n, head_dim), torch.randn(1, kv_heads, n, head_dim)
    cache = PolicyCache(1, cp.quantized(bits, group, recent, under=cp.window(6)))
    for t in range(n):
        read = cache.append(0, keys[:, :, t : t + 1], values[:, :, t : t + 1])
    held = cache.held_positions(0)  # (kv_heads, 6) slot by slot
    assert sorted(held[0].tolist()) == list(range(n - 6, n))
    for name, exact, got in (("keys", keys, read.keys), ("values", values, read.values)):
        for h in range(kv_heads):
            for slot, position in enumerate(held[h].tolist()):
                x = exact[0, h, position]
                if position > n - 1 - recent:  # the 3 newest: exact
                    expected = x
                else:  # per token, in groups of 4 numbers
                    expected = reference_quantize_dequantize(x.view(-1, group), bits, over=1).flatten()
                assert torch.allclose(got[0, h, slot], expected, atol=1e-6), (name, h, position)
    ints = 2 * kv_heads * 6 * head_dim * bits // 8
    scales = 2 * 2 * kv_heads * 6 * (head_dim // group) * 4  # a scale and a minimum per group, float32
    ring = 2 * kv_heads * recent * head_dim * 4
    assert cache.nbytes == ints + scales + ring


def test_a_quantized_sliding_layer_lets_a_group_go_once_its_window_has_passed_it():
    """KIVI on a sliding layer (window 7): the positions within the window read as the whole cache's
    last 7, a stored group leaves once the window has passed all of it, and the bytes shrink."""
    group, recent, kv_heads, head_dim, n, window = 4, 2, 2, 8, 30, 7
    torch.manual_seed(2)
    keys, values = torch.randn(1, kv_heads, n, head_dim), torch.randn(1, kv_heads, n, head_dim)
    whole = PolicyCache(1, cp.quantized(8, group, recent))
    sliding = PolicyCache(1, cp.quantized(8, group, recent), windows=[window])
    for t in range(n):
        read_whole = whole.append(0, keys[:, :, t : t + 1], values[:, :, t : t + 1])
        read = sliding.append(0, keys[:, :, t : t + 1], values[:, :, t : t + 1])
        assert torch.equal(read.keys[:, :, -window:], read_whole.keys[:, :, -window:])
        assert torch.equal(read.values[:, :, -window:], read_whole.values[:, :, -window:])
        first = int(sliding.held_positions(0)[0, 0])
        assert first <= t + 1 - window or first == 0  # every position the window reads is held
        assert first > t - window - group or first == 0  # and no group wholly before it
    assert sliding.length == whole.length == n and sliding.nbytes < whole.nbytes / 2


def assert_quantization_changed_little(quantized: torch.Tensor, exact: torch.Tensor) -> None:
    """Quantized keys and values must move the next-token logits (vocab,), but only a little.

    "Moved" is measured on the logits, by far more than float32 rounding (~1e-7 at this scale);
    the KL divergence of two such close distributions is ~1e-8, below what float32 resolves (it
    came out -4.7e-08 on one CPU), so it is computed in float64 and only bounded above.
    """
    assert (quantized - exact).abs().max() > 1e-5
    kl = torch.nn.functional.kl_div(
        quantized.double().log_softmax(-1), exact.double().log_softmax(-1), log_target=True, reduction="sum"
    )
    assert float(kl) < 1e-2


def test_quantized_under_sinks_runs_a_session_and_is_refused_where_it_cannot_be(checkpoints):
    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    policy = cp.quantized(8, group=8, recent=4, under=cp.sinks(2, 14))
    both = explorer.GenerationSession(loaded, PROMPT, cache_policy=policy)
    evicting = explorer.GenerationSession(loaded, PROMPT, cache_policy=cp.sinks(2, 14))
    for _ in range(10):
        token = evicting.step().token_id
        both.force(token)
    held = [both.cache.held_positions(1), evicting.cache.held_positions(1)]  # (kv_heads, held), in slot order
    assert held[0].sort(dim=1).values.tolist() == held[1].sort(dim=1).values.tolist()
    assert both.cache_bytes < evicting.cache_bytes  # (the formula: the test above)
    assert_quantization_changed_little(both.next_logits(), evicting.next_logits())
    assert cp.parse_policy(cp.policy_spec(policy)) == policy and "+sinks:2:14" in cp.policy_spec(policy)
    for under, message in [(cp.snapkv(16, 4), "not under SnapKV"), (cp.sinks(2, 2), "fewer than the budget"),
                           (cp.sinks(2, 14, cache_positions=True), "not under sinks")]:  # fmt: skip
        with pytest.raises(cp.PolicyError, match=message):
            cp.quantized(8, 8, 4, under=under)


def test_a_quantized_session_steps_and_saves_memory(checkpoints):
    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    full = explorer.GenerationSession(loaded, PROMPT)
    int8 = explorer.GenerationSession(loaded, PROMPT, cache_policy=cp.quantized(8, group=8, recent=4))
    for _ in range(10):
        full.step(), int8.step()
    assert int8.cache_bytes < 0.6 * full.cache_bytes
    assert_quantization_changed_little(int8.next_logits(), full.next_logits())


# ---------------------------------------------------------------- bad input, every family


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: cp.window(0), "at least 1"),
        (lambda: cp.window(-3), "at least 1"),
        (lambda: cp.window("64"), "whole number"),
        (lambda: cp.window(12.5), "whole number"),
        (lambda: cp.sinks(4, 0), "at least 1"),
        (lambda: cp.heavy_hitters(True, 4), "whole number"),
        (lambda: cp.quantized(bits=3), "8 or 4 bits"),
        (lambda: cp.quantized(bits=8, under="sinks"), "takes an eviction policy"),
    ],
)
def test_a_bad_policy_is_refused_with_what_to_do(make, message):
    with pytest.raises(cp.PolicyError, match=message):
        make()


def test_a_budget_is_checked_against_the_sinks_and_the_text(checkpoints):
    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    for budget, message in [(0, "no room past"), (4, "no room past"), (10_000, "holds the whole text"),
                            ("64", "whole number"), (math.nan, "whole number")]:  # fmt: skip
        with pytest.raises(explorer.InputError, match=message):
            cp.budget_curve(loaded, PROMPT, budgets=(budget,))


def test_a_policy_with_interventions_or_without_the_cache_is_refused(checkpoints):
    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    with pytest.raises(explorer.InputError, match="interventions do not mix"):
        explorer.GenerationSession(
            loaded, PROMPT, cache_policy=cp.window(8), interventions=explorer.ablate_heads({0: [1]})
        )
    with pytest.raises(explorer.InputError, match="turn the cache on"):
        explorer.GenerationSession(loaded, PROMPT, cache_policy=cp.window(8), use_cache=False)
    session = explorer.GenerationSession(loaded, PROMPT, cache_policy=cp.quantized(8, group=8))
    with pytest.raises(explorer.InputError, match="keeps no attention rows"):
        session.self_attention(0)
    with pytest.raises(explorer.InputError, match="full cache first"):
        session.set_use_cache(False)


FAMILIES = ["gpt2", "llama", "qwen2", "qwen3", "mistral", "phi3", "opt", "gpt_neox", "gemma3_text",
            "marian", "bart", "mbart", "t5", "flan_t5"]  # fmt: skip
REFUSED = {"t5": "relative position bias", "flan_t5": "relative position bias"}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_runs_a_policy_or_says_why_not(checkpoints, family):
    loaded = explorer.load_model(str(checkpoints[family]), progress=False)
    text = "twenty-one on March 3, 2021"
    for policy in (
        cp.sinks(2, 6),
        cp.heavy_hitters(4, 4),
        cp.quantized(8, group=math.gcd(4, loaded.config.head_dim), recent=2),
    ):
        if family in REFUSED and policy.evicts:
            with pytest.raises(explorer.InputError, match=REFUSED[family]):
                explorer.GenerationSession(loaded, text, cache_policy=policy)
            continue
        session = explorer.GenerationSession(loaded, text, cache_policy=policy)
        full = explorer.GenerationSession(loaded, text)
        for _ in range(12):
            session.step()
            full.step()
        assert session.cache.length == full.cache.length == len(session.token_ids)
        assert session.cache.self_attn_bytes < full.cache.self_attn_bytes
        # A translator's cross-attention keys of the source are kept whole: eviction is of self-attention only.
        assert session.cache.cross_attn_bytes == full.cache.cross_attn_bytes
        session.undo()  # an evicted entry cannot come back: undo runs the kept tokens again
        assert len(session.token_ids) == len(full.token_ids) - 1 and session.cache.length == len(session.token_ids)
    assert np.isfinite(session.next_logits().numpy()).all()


def test_the_budget_curve_steps_its_policies_together_as_each_would_alone(checkpoints):
    """budget_curve runs every policy as a row of one batched pass a token; each row's
    log-probabilities and bytes equal that policy's own run."""
    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    ids = loaded.tokenizer(PROMPT * 2, add_special_tokens=False)["input_ids"][:70]
    policies = cp.curve_policies((8, 16), loaded.config.head_dim, rotary=True)
    together = cp.teacher_forced_together(loaded, ids, policies)
    for policy, (log_probs, held) in zip(policies, together, strict=True):
        alone, held_alone = cp.teacher_forced(loaded, ids, policy)
        assert (log_probs - alone).abs().max() <= 1e-4 and held == held_alone, policy.label()
    rows = cp.budget_curve(loaded, ids, budgets=(8, 16))
    assert [r.label for r in rows] == [p.label() for p in policies]
    full = rows[0]
    expected = math.exp(-float(together[1][0][16:].mean()))  # window 8, positions from 17 scored
    assert rows[1].perplexity == pytest.approx(expected) and full.budget is None and full.bytes > rows[1].bytes


# ---------------------------------------------------------------- links, saved sessions, the browser's copy


@pytest.mark.parametrize(
    "policy",
    [
        cp.full(),
        cp.window(64),
        cp.sinks(4, 60, cache_positions=True),
        cp.sinks(4, 60),
        cp.heavy_hitters(32, 32),
        cp.key_norm(64),
        cp.snapkv(64, 16),
        cp.quantized(4, 16, 8),
    ],
    ids=lambda p: p.label(),
)
def test_a_policy_is_written_as_text_and_read_back(policy):
    assert cp.parse_policy(cp.policy_spec(policy)) == policy


@pytest.mark.parametrize(
    "spec",
    ["window:0", "window:-1", "window:64:3", "sinks:4", "lru:5", "int3:32:16", "window:1e9", "window:9999999",
     "window: 64", "window:٣", "", "x" * 100, 5, None, ["window", 64], "key_norm:64:cache", "sinks:4:60:cash"],
)  # fmt: skip
def test_a_damaged_policy_is_refused_by_name(spec):
    with pytest.raises(explorer.InputError, match="cache policy"):
        cp.parse_policy(spec)


def test_a_link_and_a_saved_session_keep_the_policy(checkpoints):
    from explorer.analysis import snapshot

    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    session = explorer.GenerationSession(loaded, PROMPT, cache_policy=cp.sinks(2, 10))
    for _ in range(5):
        session.step()
    snap = snapshot.snapshot_of("tiny", session)
    query = snapshot.query_string(snap)
    assert "policy=sinks%3A2%3A10" in query
    params = dict(pair.split("=", 1) for pair in query[1:].split("&"))
    from urllib.parse import unquote_plus

    reopened = snapshot.from_query({k: unquote_plus(v) for k, v in params.items()})
    restored = snapshot.restore(loaded, reopened)
    assert restored.cache_policy == cp.sinks(2, 10) and restored.token_ids == session.token_ids
    assert torch.equal(restored.next_logits(), session.next_logits())
    data = snapshot.save_bytes(snap, session)  # the heatmaps' arrays, with the evicted keys at zero
    again, arrays = snapshot.read_bytes(data)
    assert again.cache_policy == "sinks:2:10" and snapshot.attention_difference(restored, arrays) < 1e-3
    plain = snapshot.snapshot_of("tiny", explorer.GenerationSession(loaded, PROMPT))
    assert "policy" not in snapshot.query_string(plain)  # links to full-cache sessions are as before
    with pytest.raises(explorer.InputError, match="cache policy"):
        snapshot.checked_snapshot({"model": "tiny", "text": PROMPT, "cache_policy": "window:0"})
