"""Cache policies: which keys and values the KV cache keeps, and how precisely, with what each
costs against the full cache.

    from explorer import cache_policies as cp
    session = explorer.GenerationSession(loaded, text, cache_policy=cp.sinks(4, 64))
    session.cache_bytes                                   # what the buffers really hold
    cp.perplexity(loaded, text, cp.window(64), start=68)  # teacher-forced, positions >= start scored
    cp.budget_curve(loaded, text, budgets=(32, 64, 128, 256))

The definitions are in ``explorer/model/cache_policy.py``, the cache that applies them in
``explorer/model/policy_cache.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

from explorer.admission import PREFILL_CHUNK, between_chunks
from explorer.errors import InputError
from explorer.loading import LoadedModel
from explorer.model import CacheBatch, ModelConfig
from explorer.model.cache_policy import (
    CachePolicy,
    HeavyHitters,
    KeyNorm,
    PolicyError,
    Quantized,
    Sinks,
    SnapKV,
    Window,
)
from explorer.model.policy_cache import PolicyCache

__all__ = [
    "CachePolicy", "CurveRow", "PolicyError", "budget_curve", "full", "heavy_hitters", "key_norm", "perplexity",
    "quantized", "sinks", "snapkv", "token_log_probs", "window",
]  # fmt: skip


def full() -> CachePolicy:
    """Every key and value, in full precision."""
    return CachePolicy()


def window(size: int, cache_positions: bool = False) -> Window:
    """A query reads the last ``size`` positions, its own included. ``cache_positions``: rotary
    keys take their rank in the cache as their position (StreamingLLM's way)."""
    return Window(size, cache_positions=cache_positions)


def sinks(n_sinks: int, size: int, cache_positions: bool = False) -> Sinks:
    """StreamingLLM: the first ``n_sinks`` positions and the last ``size``. ``cache_positions``:
    rotary keys take their rank in the cache as their position, as the paper does."""
    return Sinks(n_sinks, size, cache_positions=cache_positions)


def heavy_hitters(heavy: int, recent: int) -> HeavyHitters:
    """H2O: the ``heavy`` keys of most accumulated attention and the last ``recent`` positions."""
    return HeavyHitters(heavy, recent)


def key_norm(size: int) -> KeyNorm:
    """kvpress's KnormPress: the ``size`` keys of smallest L2 norm (per key/value head)."""
    return KeyNorm(size)


def snapkv(size: int, observe: int = 16) -> SnapKV:
    """SnapKV (kvpress's SnapKVPress): after the prompt's pass, the ``size`` prompt keys the last
    ``observe`` queries attended to most, per key/value head; the generated tokens then join them."""
    return SnapKV(size, observe)


def quantized(bits: int = 8, group: int = 32, recent: int = 16, under: CachePolicy | None = None) -> Quantized:
    """KIVI: old keys per channel and values per token as ``bits``-bit integers in groups of
    ``group``, the newest ``recent`` tokens (and up to ``group - 1`` more) in full precision.
    ``under`` an eviction policy (a window, sinks, H2O, key norm): its slots hold the integers,
    keys per token too (eviction breaks up the consecutive tokens a per-channel group needs)."""
    if isinstance(under, CachePolicy) and not under.evicts:  # the full cache: nothing to run under
        under = None
    return Quantized(bits, group, recent, under)


def _text_ids(loaded: LoadedModel, text: str | Sequence[int]) -> list[int]:
    if loaded.config.is_encoder_decoder:
        raise InputError("Perplexity is measured on a decoder-only model (a translator's text needs its source).")
    ids = list(text) if not isinstance(text, str) else loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) > loaded.config.max_positions:
        raise InputError(
            f"The text has {len(ids):,} tokens, more than the model's window of {loaded.config.max_positions:,}."
        )
    return ids


def token_log_probs(loaded: LoadedModel, ids: Sequence[int], policy: CachePolicy) -> torch.Tensor:
    """(T - 1,) log p(ids[t + 1] | ids[: t + 1]) under ``policy``, teacher-forced as generation
    runs it: the full cache in one pass; an evicting cache in one pass while it has room, then
    one token a pass; a quantized one a token a pass (each query reads the older ones quantized)."""
    return teacher_forced(loaded, ids, policy)[0]


@torch.inference_mode()
def teacher_forced(loaded: LoadedModel, ids: Sequence[int], policy: CachePolicy) -> tuple[torch.Tensor, int]:
    """``token_log_probs`` and the bytes the cache holds at the end."""
    policy.check(loaded.config)
    refuse_prefill_press(policy)
    c, model = loaded.config, loaded.model
    tokens = torch.tensor([list(ids)], device=next(model.parameters()).device)  # (1, T)
    n = tokens.shape[1]
    if not (policy.evicts or policy.bits):
        logits = model(tokens).logits[0]  # (T, vocab)
        held = full_cache_bytes(c, n, next(model.parameters()).element_size())
    else:
        cache = PolicyCache(c.n_layers, policy, rotary=model.decoder.rotary, windows=c.windows())
        first = min(policy.budget, n) if policy.evicts else 1
        bounds = [(0, first)] + [(i, i + 1) for i in range(first, n)]
        logits = torch.cat([model(tokens[:, a:b], cache=cache).logits[0] for a, b in bounds])  # (T, vocab)
        held = cache.nbytes
    return logits[:-1].float().log_softmax(-1).gather(1, tokens[0, 1:, None])[:, 0], held


@torch.inference_mode()
def teacher_forced_together(
    loaded: LoadedModel, ids: Sequence[int], policies: Sequence[CachePolicy],
    progress: Callable[[float], None] | None = None,
) -> list[tuple[torch.Tensor, int]]:  # fmt: skip
    """``teacher_forced`` for many policies at once: the full cache in one parallel pass, the
    others stepped together, a token a pass with one row per policy (each row its own cache), so
    that the model's weights are read once a token for all of them. ``progress`` hears the share done."""
    for policy in policies:
        policy.check(loaded.config)
        refuse_prefill_press(policy)
    results: list[tuple[torch.Tensor, int] | None] = [None] * len(policies)
    stepped = [i for i, p in enumerate(policies) if p.evicts or p.bits]
    for i in set(range(len(policies))) - set(stepped):
        results[i] = teacher_forced(loaded, ids, policies[i])
    if stepped:
        rotary = loaded.model.decoder.rotary
        windows = loaded.config.windows()
        caches = [PolicyCache(loaded.config.n_layers, policies[i], rotary=rotary, windows=windows) for i in stepped]
        batch, model = CacheBatch(caches), loaded.model
        tokens = torch.tensor(list(ids), device=next(model.parameters()).device)  # (T,)
        log_probs = torch.empty(len(stepped), len(ids) - 1)
        for t in range(len(ids)):  # the last token too: the bytes held are those after the whole text
            logits = model(tokens[t].expand(len(stepped), 1), cache=batch, last_only=True).logits[:, -1]  # (B, vocab)
            if t + 1 < len(ids):
                log_probs[:, t] = logits.float().log_softmax(-1)[:, ids[t + 1]]
            if progress is not None:
                progress((t + 1) / len(ids))
            if t % PREFILL_CHUNK == PREFILL_CHUNK - 1:  # Steps first; stop if the client has gone
                between_chunks()
        for row, i in enumerate(stepped):
            results[i] = (log_probs[row], caches[row].nbytes)
    return results


def full_cache_bytes(config: ModelConfig, length: int, element_size: int) -> int:
    """What the full cache holds after ``length`` tokens: 2 x kv_heads x head_dim per position, a
    sliding layer counting the min(window, length) positions its queries still read."""
    positions = sum(min(length, config.window_of(i) or length) for i in range(config.n_layers))
    return 2 * config.n_kv_heads * config.head_dim * positions * element_size


def refuse_prefill_press(policy: CachePolicy) -> None:
    if policy.prefill_press:
        raise InputError(
            f"{policy.label()} compresses a prompt once, after its pass: teacher-forcing a text a token at a time "
            "gives it no prompt. Measure it in a session (the KV-cache lab's Run, or explorer.analysis.cache_lab)."
        )


def perplexity(loaded: LoadedModel, text: str | Sequence[int], policy: CachePolicy, start: int = 1) -> float:
    """exp of the mean negative log-likelihood of the tokens at positions >= ``start``, each
    predicted from the ones before it under ``policy``."""
    ids = _text_ids(loaded, text)
    if isinstance(start, bool) or not isinstance(start, int) or not 1 <= start < len(ids):
        raise InputError(f"start must be a position from 1 to {len(ids) - 1} (the text has {len(ids)} tokens).")
    log_probs = token_log_probs(loaded, ids, policy)  # log_probs[t - 1] predicts position t
    return math.exp(-float(log_probs[start - 1 :].mean()))


@dataclass(frozen=True)
class CurveRow:
    policy: str  # its kind: "full", "window", "sinks", "sinks_cache", "heavy_hitters", "key_norm", "int8", "int4"
    label: str
    budget: int | None  # keys a query reads at most; None: all
    bytes: int  # what the cache holds at the text's end
    perplexity: float


def turns_keys(config: ModelConfig) -> bool:
    """Whether positions within the cache (StreamingLLM's renumbering) fit the model: rotary keys,
    and no sliding layer (its window counts the text's positions)."""
    return config.positions == "rope" and not any(config.windows())


def curve_policies(
    budgets: Iterable[int], head_dim: int, n_sinks: int = 4, rotary: bool = False
) -> list[CachePolicy]:  # fmt: skip
    """The policies of a budget curve: the full cache, then per budget a window, sinks + window,
    H2O (half heavy, half recent), key norm and (``rotary`` models) sinks + window with positions
    within the cache; then int8 and int4 over the whole cache (groups of 32, or of the largest
    divisor of the head size below it)."""
    policies: list[CachePolicy] = [full()]
    for b in budgets:
        policies += [window(b), sinks(n_sinks, b - n_sinks), heavy_hitters(b // 2, b - b // 2), key_norm(b)]
        if rotary:  # StreamingLLM's own way beside: positions within the cache
            policies.append(sinks(n_sinks, b - n_sinks, cache_positions=True))
    group = math.gcd(32, head_dim)
    return [*policies, quantized(8, group), quantized(4, group)]


def budget_curve(
    loaded: LoadedModel, text: str | Sequence[int], budgets: Sequence[int] = (32, 64, 128, 256),
    start: int | None = None, n_sinks: int = 4, progress: Callable[[float], None] | None = None,
) -> list[CurveRow]:  # fmt: skip
    """Teacher-forced perplexity of ``text`` under each policy at each budget, against the full
    cache: positions >= ``start`` are scored (by default past the largest budget, where every
    policy has begun to evict)."""
    ids = _text_ids(loaded, text)
    budgets = [check_budget(b, len(ids), n_sinks) for b in budgets]
    start = max(budgets) + 1 if start is None else start
    if isinstance(start, bool) or not isinstance(start, int) or not 1 <= start < len(ids):
        raise InputError(f"start must be a position from 1 to {len(ids) - 1} (the text has {len(ids)} tokens).")
    policies = curve_policies(budgets, loaded.config.head_dim, n_sinks, rotary=turns_keys(loaded.config))
    rows = []
    for policy, (log_probs, held) in zip(
        policies, teacher_forced_together(loaded, ids, policies, progress), strict=True
    ):
        score = math.exp(-float(log_probs[start - 1 :].mean()))
        kind = policy.name + ("_cache" if policy.in_cache_positions else "")
        rows.append(CurveRow(kind, policy.label(), policy.budget, held, score))
    return rows


def check_budget(budget: object, n_tokens: int, n_sinks: int = 0) -> int:
    """A budget as a user may give it: a whole number above the sinks and below the text's length."""
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise InputError(f"A budget is a whole number of positions, not {budget!r}.")
    if budget <= n_sinks:
        raise InputError(f"A budget of {budget} leaves no room past the {n_sinks} sinks: give more than {n_sinks}.")
    if budget >= n_tokens:
        raise InputError(f"A budget of {budget} holds the whole text ({n_tokens} tokens): nothing would be evicted.")
    return budget


# ---------------------------------------------------------------- a policy as text (links, saved sessions)
SPEC_FIELDS = {"full": 0, "window": 1, "sinks": 2, "heavy_hitters": 2, "key_norm": 1, "snapkv": 2, "int8": 2,
               "int4": 2}  # fmt: skip
MAX_SPEC_CHARS = 40


def policy_spec(policy: CachePolicy) -> str:
    """A policy as short text: "full", "window:64", "sinks:4:60", "heavy_hitters:32:32",
    "key_norm:64", "int8:32:16" (bits, group, recent)."""
    if isinstance(policy, Quantized):
        numbers = (policy.group, policy.recent)
    elif isinstance(policy, (Window, KeyNorm)):
        numbers = (policy.size,)
    elif isinstance(policy, Sinks):
        numbers = (policy.sinks, policy.window)
    elif isinstance(policy, HeavyHitters):
        numbers = (policy.heavy, policy.recent)
    elif isinstance(policy, SnapKV):
        numbers = (policy.size, policy.observe)
    else:
        numbers = ()
    spec = ":".join([policy.name, *map(str, numbers)]) + (":cache" if policy.in_cache_positions else "")
    return spec if getattr(policy, "under", None) is None else f"{spec}+{policy_spec(policy.under)}"


def parse_policy(spec: object) -> CachePolicy:
    """The policy ``policy_spec`` wrote; anything else (it comes from a link, a file, the browser)
    is refused with a message that says what a policy looks like."""
    usage = 'a cache policy is written like "full", "window:64", "sinks:4:60", "sinks:4:60:cache" or "int8:32:16"'
    if not isinstance(spec, str) or len(spec) > MAX_SPEC_CHARS:
        raise InputError(f"The session's cache policy is not one this explorer wrote: {usage}.")
    if "+" in spec:  # a quantized cache under an eviction policy: "int8:32:16+sinks:4:60"
        own, under = spec.split("+", 1)
        quantization = parse_policy(own)
        if not isinstance(quantization, Quantized) or "+" in under:
            raise InputError(f"The session's cache policy {spec!r} is not one this explorer wrote: {usage}.")
        try:
            return quantized(quantization.n_bits, quantization.group, quantization.recent, under=parse_policy(under))
        except PolicyError as error:
            raise InputError(f"The session's cache policy {spec!r}: {error}") from error
    name, *numbers = spec.split(":")
    in_cache = name in ("window", "sinks") and numbers[-1:] == ["cache"]
    numbers = numbers[:-1] if in_cache else numbers
    if SPEC_FIELDS.get(name) != len(numbers) or not all(n.isascii() and n.isdigit() and len(n) <= 5 for n in numbers):
        raise InputError(f"The session's cache policy {spec!r} is not one this explorer wrote: {usage}.")
    values = [int(n) for n in numbers]
    if any(v > 100_000 for v in values):
        raise InputError(f"The session's cache policy {spec!r} has a number out of range.")
    makers = {"full": full, "window": window, "sinks": sinks, "heavy_hitters": heavy_hitters, "key_norm": key_norm,
              "snapkv": snapkv,
              "int8": lambda g, r: quantized(8, g, r), "int4": lambda g, r: quantized(4, g, r)}  # fmt: skip
    try:
        return makers[name](*values, cache_positions=True) if in_cache else makers[name](*values)
    except PolicyError as error:
        raise InputError(f"The session's cache policy {spec!r}: {error}") from error
