"""How a session's cache is made, filled and taken back: the full cache, or a cache under a policy
(``explorer.cache_policies``). The session asks its plan and never looks at the policy itself.

- ``FullCache``: every key and value in the model's store (``model/paged.py``): one pass a chunk
  of ``PREFILL_CHUNK`` new tokens (a long prefill lets other visitors' Steps through), an undo
  cuts the cache back, a fork shares its blocks.
- ``UnderPolicy``: a cache that evicts or quantizes: a window (sinks or not) in the model's
  store (``model/window_cache.py``), any other policy in a ``PolicyCache`` of its own. An evicting cache processes one
  token a pass once it is full (each new key may evict another before the next query reads); an
  entry evicted or quantized cannot be taken back, so an undo runs the kept tokens again; the
  views mask the keys each query's cache no longer held (``EvictionLog``), and a policy that
  rewrites what earlier queries read (quantized groups, keys turned to their rank) keeps no
  attention rows to draw.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from explorer.admission import PREFILL_CHUNK
from explorer.errors import InputError
from explorer.model import NOTHING, KVCache, ModelConfig, Record
from explorer.model.cache_policy import CachePolicy, PolicyError
from explorer.model.policy_cache import EvictionLog, PolicyCache
from explorer.model.taps import Intervention
from explorer.model.window_cache import WindowedKVCache, reads_of

Passes = list[tuple[int, int]]  # (start, end): a pass processes tokens start .. end - 1


class FullCache:
    """The cache as it always was: every key and value, in full precision."""

    under_policy = False

    def __init__(self, model, config: ModelConfig) -> None:
        self.model, self.config = model, config
        self.policy = CachePolicy()
        self.eviction_log: EvictionLog | None = None

    def record(self, record: Record) -> Record:
        """What the session's passes keep for the views."""
        return record

    def new_cache(self) -> KVCache:
        return self.model.new_cache()

    def passes(self, first: int, end: int, prompt_length: int, use_cache: bool) -> Passes:
        """The passes that process tokens ``first`` .. ``end - 1``: with the cache, one a chunk of
        ``PREFILL_CHUNK`` positions (each reads the keys the chunks before it cached, so the result
        is the one pass's; other visitors' Steps run between two: ``explorer/admission.py``);
        without it, one (each pass would run the whole sequence again)."""
        if not use_cache:
            return [(first, end)]
        chunks = [(start, min(start + PREFILL_CHUNK, end)) for start in range(first, end, PREFILL_CHUNK)]
        return chunks or [(first, end)]

    def rewrites_entries(self) -> bool:
        """Whether a token taken back needs the cache rebuilt (its entries changed since)."""
        return False

    def refuse_cache_switch(self) -> None:
        """Raise if the cache may not be turned off and on."""

    def refuse_views(self) -> None:
        """Raise if the session keeps no attention rows to draw."""

    def evicted(self, layer: int, first: int, last: int, n: int) -> np.ndarray | None:
        """(kv_heads, queries, T) True where a key had left the cache before the query at that row
        (positions first .. last - 1) ran; None: nothing ever leaves."""
        return None


class UnderPolicy(FullCache):
    """A cache that evicts or quantizes (``policy_cache.PolicyCache``)."""

    under_policy = True

    def __init__(self, model, config: ModelConfig, policy: CachePolicy, record: Record) -> None:
        super().__init__(model, config)
        self.policy = policy
        if policy.evicts and "qk" in self.record(record):  # the views mask what each query's cache no longer held
            self.eviction_log = EvictionLog(config.n_layers)

    def record(self, record: Record) -> Record:
        """What each query read changed later (a group quantized, a key turned to a new rank): nothing to draw."""
        return NOTHING if self.policy.bits is not None or self.policy.in_cache_positions else record

    def new_cache(self) -> KVCache:
        """A window (with sinks or not) in the model's store (``WindowedKVCache``: the session
        batches with others like any) on a model without sliding layers; any other policy, or any on
        a model with sliding layers, in a ``PolicyCache`` of its own."""
        if self.eviction_log is not None:
            self.eviction_log.clear()
        reads, windows = reads_of(self.policy), self.config.windows()
        if reads is not None and not any(windows):
            return WindowedKVCache(self.config.n_layers, self.model.cache_store(), reads, self.eviction_log)
        # A model with sliding layers: a window or sinks in slots too, where a sliding layer's window
        # frees the slot of what it passes (policy_cache.py); the session still steps in a batch (SplitBatch).
        return PolicyCache(self.config.n_layers, self.policy, self.eviction_log, self.model.decoder.rotary, windows)

    def passes(self, first: int, end: int, prompt_length: int, use_cache: bool) -> Passes:
        """One pass while the cache has room for every token, then one a token (each new key may
        evict another before the next query reads the cache); a press: the prompt in one pass
        (pressed after it), then one a token."""
        if not use_cache:
            return [(first, end)]
        if self.policy.prefill_press:
            prompt_end = max(first, min(end, prompt_length))
            together = [(first, prompt_end)] if prompt_end > first else []
            return together + [(i, i + 1) for i in range(prompt_end, end)]
        budget = self.policy.budget
        room = end - first if budget is None else max(0, budget - first)  # the cache holds the tokens before first
        if room >= end - first:
            return [(first, end)]
        together = [(first, first + room)] if room else []
        return together + [(i, i + 1) for i in range(first + room, end)]

    def rewrites_entries(self) -> bool:
        return True  # an evicted entry cannot be taken back: the kept tokens are run again

    def refuse_cache_switch(self) -> None:
        raise InputError(f"The cache is under a policy ({self.policy.label()}): choose the full cache first.")

    def refuse_views(self) -> None:
        if self.policy.in_cache_positions:
            raise InputError(
                f"Under {self.policy.label()} a key is turned to a new position whenever an older one "
                "leaves: no kept query and key give what an earlier step read, so the session draws no heatmaps. "
                "Keep the original positions to see them; the KV-cache lab measures both."
            )
        if self.policy.bits is not None:
            raise InputError(
                f"Under a quantized cache ({self.policy.label()}) each query read keys as they were held at its "
                "step, some in full precision, later as integers: the session keeps no attention rows to draw. "
                "The KV-cache lab measures what quantization changes."
            )

    def evicted(self, layer: int, first: int, last: int, n: int) -> np.ndarray | None:
        if self.eviction_log is None:
            return None
        evicted_at = self.eviction_log.evicted_at(layer, n, self.config.n_kv_heads)  # (kv_heads, T)
        queries = np.arange(first, last)[None, :, None]
        return evicted_at.numpy()[:, None, :] <= queries


def plan_for(
    policy: CachePolicy | None, model, config: ModelConfig, use_cache: bool,
    interventions: Sequence[Intervention], record: Record,
) -> FullCache:  # fmt: skip
    """The session's plan for ``policy`` (None or the full cache: ``FullCache``); refuses, saying
    what to do, a policy that cannot apply to this session."""
    policy = CachePolicy() if policy is None else policy
    if not isinstance(policy, CachePolicy):
        raise InputError(f"A cache policy comes from explorer.cache_policies, not {policy!r}.")
    if not (policy.evicts or policy.bits is not None):
        return FullCache(model, config)
    if interventions:
        raise InputError(
            "A cache policy and interventions do not mix: a branch compares with its parent under the "
            "full cache. Remove the interventions, or use the full cache."
        )
    if not use_cache:
        raise InputError("A cache policy applies to the cache: turn the cache on.")
    try:
        policy.check(config)
    except PolicyError as error:
        raise InputError(str(error)) from error
    return UnderPolicy(model, config, policy, record)
