"""Which keys and values a cache keeps, and how precisely: the policies of long-context systems,
as operations on our own cache (``policy_cache.PolicyCache`` holds the entries).

An evicting policy has a *budget*: the most keys a query attends to, its own included. While the
cache holds fewer, every key stays. Once it is full, each new key takes the slot of one held
entry, the *victim*, chosen per key/value head before the new query attends:

- ``Window(W)``: the oldest entry leaves; a query reads the last W positions.
- ``Sinks(S, W)`` (StreamingLLM, Xiao et al. 2024): the first S positions never leave (the
  "attention sinks"); of the rest, the oldest leaves.
- ``HeavyHitters(H, R)`` (H2O, Zhang et al. 2023): each held key adds up the attention it has
  received from every query since it was written, summed over the query heads that share its
  key/value head (a GQA group); the last R positions stay, and of the others the key with the
  least accumulated attention leaves.
- ``KeyNorm(K)`` (kvpress's ``KnormPress``: keys of small L2 norm draw attention): the key of
  largest norm leaves (of keys equal in norm, the oldest).

``SnapKV(K, observe)`` (Li et al. 2024, as kvpress's ``SnapKVPress`` defines it) is a press: once
the prompt's pass has run, each key/value head keeps the K prompt keys that its last ``observe``
queries attended to most (their mean weight, smoothed over neighbouring keys by a 5-wide average,
averaged over the GQA group; the observed queries' own keys always stay). The cache then grows
with the generated tokens.

``Quantized(bits, group, recent)`` (KIVI, Liu et al. 2024) keeps every entry but stores old keys
per channel and old values per token as ``bits``-bit integers with a scale and a minimum per
group of ``group`` numbers; the newest tokens stay in full precision.

On a model with sliding-window layers (Gemma 3's local layers, Mistral), a policy applies to every
layer, and a sliding layer keeps its window: a key its window has passed is never read, whatever
the policy keeps, and leaves first (its slot is the next one's before the policy chooses a
victim). The budget so applies within what the window allows: a layer whose window is no larger
than the budget holds exactly what it holds under the full cache, and the policy evicts only on
the others (the global layers; sliding layers of a wider window, where the window still takes
the sinks and heavy hitters it passes). SnapKV presses a sliding layer's prompt keys among those
within its window; a quantized sliding layer lets a group go once the window has passed it.
Positions within the cache (StreamingLLM's renumbering) are refused there: the window counts
the text's positions.

The policies here are definitions only: given what a layer holds, which slot a new entry
takes. They never import transformers; the tests check them against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .config import ModelConfig

TIE = 1e-5  # scores this close (relative) count as equal: the oldest entry leaves


class PolicyError(ValueError):
    """A policy that cannot apply (a budget out of range, a model it does not fit): the message
    says what to change."""


@dataclass(frozen=True)
class CachePolicy:
    """Keep everything, in full precision (the cache as it always was)."""

    @property
    def name(self) -> str:
        return "full"

    @property
    def budget(self) -> int | None:
        """The most keys a query attends to (its own included); None: all of them."""
        return None

    @property
    def evicts(self) -> bool:
        return self.budget is not None

    @property
    def needs_attention(self) -> bool:
        """Whether the cache must see each new query's attention weights (H2O's scores)."""
        return False

    @property
    def bits(self) -> int | None:
        return None

    @property
    def in_cache_positions(self) -> bool:
        """Whether rotary keys take their rank in the cache as their position (StreamingLLM's way)
        instead of keeping the position they were written at."""
        return False

    @property
    def prefill_press(self) -> bool:
        """Whether the policy compresses the prompt once, after its pass, and then lets the cache
        grow (kvpress's presses), instead of evicting at every step."""
        return False

    def label(self) -> str:
        return "full cache"

    def check(self, config: ModelConfig) -> None:
        """Refuse, by name and with the reason, a model the policy cannot run on."""

    def victims(self, held: HeldEntries, new_position: int) -> torch.Tensor:
        """(kv_heads,) for each key/value head the slot whose entry leaves for the new one."""
        raise NotImplementedError


@dataclass
class HeldEntries:
    """What one layer's cache holds, slot by slot (the slots are not in position order)."""

    positions: torch.Tensor  # (kv_heads, slots) int64: the position each entry was written at
    keys: torch.Tensor  # (kv_heads, slots, head_dim): as attention reads them (after rotary)
    scores: torch.Tensor  # (kv_heads, slots): attention received so far (H2O)


def _check_count(value: object, what: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{what} must be a whole number, not {value!r}.")
    if value < least:
        raise PolicyError(f"{what} must be at least {least} (got {value}).")
    return value


def _refuse_models_it_cannot_cut(config: ModelConfig, policy: str) -> None:
    if config.positions == "relative":
        raise PolicyError(
            f"{policy} cannot run on T5: its relative position bias is computed for every key position at "
            "once, and a cache that drops keys would need it per kept key. Use a model with rotary, learned "
            "or sinusoidal positions."
        )


def _refuse_in_cache_positions_without_rotary(config: ModelConfig) -> None:
    if config.positions != "rope":
        raise PolicyError(
            "Positions within the cache are StreamingLLM's way for rotary models, whose keys can be turned to a "
            f"new position; this model's positions are {config.positions}. Keep the original positions."
        )
    if any(config.window_of(i) is not None for i in range(config.n_layers)):
        raise PolicyError(
            "Positions within the cache renumber the keys, and this model's sliding-window layers read the last "
            "positions of the text: keep the original positions (sinks + window)."
        )


@dataclass(frozen=True)
class Window(CachePolicy):
    size: int = 64
    # StreamingLLM's way for rotary models: a key's position is its rank in the cache, not the text's.
    cache_positions: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        _check_count(self.size, "The window", 1)

    @property
    def name(self) -> str:
        return "window"

    @property
    def budget(self) -> int:
        return self.size

    @property
    def in_cache_positions(self) -> bool:
        return self.cache_positions

    def label(self) -> str:
        return f"window {self.size}" + (", positions in the cache" if self.cache_positions else "")

    def check(self, config: ModelConfig) -> None:
        _refuse_models_it_cannot_cut(config, "An evicting cache")
        if self.cache_positions:
            _refuse_in_cache_positions_without_rotary(config)

    def victims(self, held: HeldEntries, new_position: int) -> torch.Tensor:
        return held.positions.argmin(dim=1)  # the oldest


@dataclass(frozen=True)
class Sinks(CachePolicy):
    sinks: int = 4
    window: int = 64
    cache_positions: bool = field(default=False, kw_only=True)  # as Window's

    def __post_init__(self) -> None:
        _check_count(self.sinks, "The number of sinks", 1)
        _check_count(self.window, "The window", 1)

    @property
    def name(self) -> str:
        return "sinks"

    @property
    def budget(self) -> int:
        return self.sinks + self.window

    @property
    def in_cache_positions(self) -> bool:
        return self.cache_positions

    def label(self) -> str:
        where = ", positions in the cache" if self.cache_positions else ""
        return f"sinks {self.sinks} + window {self.window}{where}"

    def check(self, config: ModelConfig) -> None:
        _refuse_models_it_cannot_cut(config, "An evicting cache")
        if self.cache_positions:
            _refuse_in_cache_positions_without_rotary(config)

    def victims(self, held: HeldEntries, new_position: int) -> torch.Tensor:
        sink = held.positions < self.sinks
        return held.positions.masked_fill(sink, torch.iinfo(torch.int64).max).argmin(dim=1)  # the oldest non-sink


@dataclass(frozen=True)
class HeavyHitters(CachePolicy):
    heavy: int = 16
    recent: int = 48

    def __post_init__(self) -> None:
        _check_count(self.heavy, "The number of heavy hitters", 1)
        _check_count(self.recent, "The number of recent positions", 1)

    @property
    def name(self) -> str:
        return "heavy_hitters"

    @property
    def budget(self) -> int:
        return self.heavy + self.recent

    @property
    def needs_attention(self) -> bool:
        return True

    def label(self) -> str:
        return f"H2O: {self.heavy} heavy + {self.recent} recent"

    def check(self, config: ModelConfig) -> None:
        _refuse_models_it_cannot_cut(config, "An evicting cache")

    def victims(self, held: HeldEntries, new_position: int) -> torch.Tensor:
        recent = held.positions > new_position - self.recent  # the new one makes the R-th
        return held.scores.masked_fill(recent, float("inf")).argmin(dim=1)


@dataclass(frozen=True)
class KeyNorm(CachePolicy):
    size: int = 64

    def __post_init__(self) -> None:
        _check_count(self.size, "The budget", 1)

    @property
    def name(self) -> str:
        return "key_norm"

    @property
    def budget(self) -> int:
        return self.size

    def label(self) -> str:
        return f"key norm {self.size}"

    def check(self, config: ModelConfig) -> None:
        _refuse_models_it_cannot_cut(config, "An evicting cache")

    def victims(self, held: HeldEntries, new_position: int) -> torch.Tensor:
        """The largest key leaves. Keys of one token at two positions have the same norm in a
        rotary model's first layer (a rotation keeps lengths), equal but for rounding: norms within
        a relative 1e-5 of the largest count as equal, and of those the oldest leaves."""
        norms = held.keys.float().norm(dim=-1)  # (kv_heads, slots)
        largest = norms >= norms.amax(dim=1, keepdim=True) * (1 - TIE)
        return held.positions.masked_fill(~largest, torch.iinfo(torch.int64).max).argmin(dim=1)


@dataclass(frozen=True)
class Quantized(CachePolicy):
    n_bits: int = 8
    group: int = 32
    recent: int = 16
    # An eviction policy whose slots hold the integers. KIVI's keys are quantized per channel over
    # a group of consecutive tokens, which eviction breaks up: under one, keys are quantized per
    # token (like values), each entry once it leaves the ``recent`` newest positions.
    under: CachePolicy | None = None

    def __post_init__(self) -> None:
        if self.n_bits not in (4, 8):
            raise PolicyError(f"The cache is quantized to 8 or 4 bits, not {self.n_bits!r}.")
        _check_count(self.group, "The group size", 1)
        _check_count(self.recent, "The number of full-precision recent tokens", 0)
        u = self.under
        if u is not None and not isinstance(u, CachePolicy):
            raise PolicyError(f"under= takes an eviction policy from explorer.cache_policies, not {u!r}.")
        if u is not None and (u.bits or u.prefill_press or u.in_cache_positions):
            raise PolicyError(
                f"Quantization runs under a window, sinks + window, H2O or key norm, not under {u.label()}."
            )
        if u is not None and u.evicts and self.recent >= u.budget:
            raise PolicyError(f"The full-precision recent tokens ({self.recent}) must be fewer than the budget.")

    @property
    def name(self) -> str:
        return f"int{self.n_bits}"

    @property
    def bits(self) -> int:
        return self.n_bits

    @property
    def budget(self) -> int | None:
        return None if self.under is None else self.under.budget

    @property
    def needs_attention(self) -> bool:
        return self.under is not None and self.under.needs_attention

    def label(self) -> str:
        own = f"int{self.n_bits} (groups of {self.group}, last {self.recent} in full)"
        return own if self.under is None or not self.under.evicts else f"{own} under {self.under.label()}"

    def check(self, config: ModelConfig) -> None:
        if self.under is not None:
            self.under.check(config)
        if config.head_dim % self.group:
            raise PolicyError(
                f"Values are quantized per token in groups of {self.group} of the head's {config.head_dim} "
                f"numbers: choose a group that divides {config.head_dim}."
            )

    def victims(self, held: HeldEntries, new_position: int) -> torch.Tensor:
        return self.under.victims(held, new_position)


@dataclass(frozen=True)
class SnapKV(CachePolicy):
    size: int = 64
    observe: int = 16
    kernel: int = 5  # kvpress's default smoothing

    def __post_init__(self) -> None:
        _check_count(self.size, "The budget", 1)
        _check_count(self.observe, "The observation window", 1)
        if self.observe > self.size:
            raise PolicyError(
                f"The observation window ({self.observe}) must fit the budget ({self.size}): its keys always stay."
            )

    @property
    def name(self) -> str:
        return "snapkv"

    @property
    def budget(self) -> int:
        return self.size

    @property
    def needs_attention(self) -> bool:
        return True

    @property
    def prefill_press(self) -> bool:
        return True

    def label(self) -> str:
        return f"SnapKV {self.size} (observing the last {self.observe})"

    def check(self, config: ModelConfig) -> None:
        _refuse_models_it_cannot_cut(config, "An evicting cache")

    def scores(self, probs: torch.Tensor, kv_heads: int) -> torch.Tensor:
        """(kv_heads, T) from the prompt's attention (heads, T, T): the mean weight the last
        ``observe`` queries give each earlier key, averaged over ``kernel`` neighbouring keys (zeros
        past the ends) and over each GQA group; the observed queries' own keys get the maximum."""
        heads, n, _ = probs.shape
        observed = probs[:, -self.observe :, : n - self.observe].float().mean(dim=1)  # (heads, T - observe)
        pooled = torch.nn.functional.avg_pool1d(observed[None], self.kernel, stride=1, padding=self.kernel // 2)[0]
        grouped = pooled.view(kv_heads, heads // kv_heads, -1).mean(dim=1)  # (kv_heads, T - observe)
        return torch.nn.functional.pad(grouped, (0, self.observe), value=float(grouped.max()))

    def victims(self, held: HeldEntries, new_position: int) -> torch.Tensor:
        raise NotImplementedError("SnapKV presses the prompt once; it has no victim per step")
