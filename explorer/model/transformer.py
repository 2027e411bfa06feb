"""Whole models: embed -> layers -> final norm -> vocabulary logits.

``DecoderOnlyLM`` is GPT-2 or Llama; ``EncoderDecoderLM`` is Marian (and the 2017
paper). Both share the ``Decoder`` stack; the encoder-decoder model adds an ``Encoder``
that runs once per source sentence, and every decoder layer reads its output (the memory)
through cross-attention.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .batch import CacheBatch
from .cache import KVCache
from .config import ModelConfig
from .layers import DecoderLayer, EncoderLayer
from .norms import make_norm
from .paged import PagedStore, store_of
from .positions import RelativePositionBias, RotaryPositions, SinusoidalPositions, embedding_scale
from .taps import Intervention, Tap, flat_interventions, name_taps, tapping
from .trace import NOTHING, Record, Trace


class ContextWindowError(Exception):
    """More positions than the model was trained for (the user's to fix: not a ValueError, which
    a bug could raise too)."""


@dataclass
class Output:
    logits: torch.Tensor  # (batch, T, vocab), or (batch, 1, vocab) with last_only
    trace: Trace


class InputEmbedding(nn.Module):
    """Token vectors (optionally scaled by sqrt(d_model)) plus additive position vectors,
    normed in BART's way when the family does.

    Rotary models add nothing here: their positions enter inside attention.
    """

    def __init__(self, config: ModelConfig, embed_tokens: nn.Embedding) -> None:
        super().__init__()
        self.embed_tokens = embed_tokens  # shared with the output head and the other stack
        self.scale = embedding_scale(config.d_model, config.scale_embeddings)
        self.max_positions = config.max_positions
        self.positions: nn.Module | None = None
        if config.positions == "learned":
            self.positions = nn.Embedding(config.max_positions, config.d_model)
        elif config.positions == "sinusoidal":
            self.positions = SinusoidalPositions(config.max_positions, config.d_model)
        self.norm = make_norm(config.norm, config.d_model, config.norm_eps) if config.embedding_norm else nn.Identity()
        self.tap = Tap("residual")  # the residual stream as it starts: "{stack}.embed"

    def forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(ids) * self.scale  # (B, T, d_model)
        if self.positions is not None:
            x = x + self.positions(positions)
        return self.tap(self.norm(x))


def check_positions(start: int, length: int, max_positions: int, device: torch.device | None = None) -> torch.Tensor:
    """Absolute positions start..start+length-1, refusing to go past the context window."""
    if start + length > max_positions:
        raise ContextWindowError(
            f"{start + length} positions exceed this model's context window of {max_positions}; "
            "shorten the text or undo some tokens"
        )
    return torch.arange(start, start + length, device=device)


def relative_bias(config: ModelConfig, bidirectional: bool) -> RelativePositionBias | None:
    """T5's relative position bias for one stack (shared by its layers), or None."""
    if config.positions != "relative":
        return None
    return RelativePositionBias(config.relative_buckets, config.relative_max_distance, config.n_heads, bidirectional)


class Encoder(nn.Module):
    def __init__(self, config: ModelConfig, embed_tokens: nn.Embedding) -> None:
        super().__init__()
        self.embed = InputEmbedding(config, embed_tokens)
        self.relative = relative_bias(config, bidirectional=True)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.final_norm = (
            make_norm(config.norm, config.d_model, config.norm_eps) if config.final_norm else nn.Identity()
        )
        self.memory = Tap("residual")

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = check_positions(0, ids.shape[1], self.embed.max_positions, ids.device)
        x = self.embed(ids, positions)  # (B, S, d_model)
        bias = self.relative(positions, ids.shape[1]) if self.relative is not None else None  # (1, heads, S, S)
        for layer in self.layers:
            x = layer(x, bias)
        return self.memory(self.final_norm(x))  # (B, S, d_model): the memory the decoder reads


class Decoder(nn.Module):
    def __init__(self, config: ModelConfig, embed_tokens: nn.Embedding) -> None:
        super().__init__()
        self.embed = InputEmbedding(config, embed_tokens)
        self.rotary: RotaryPositions | None = None
        self.local_rotary: RotaryPositions | None = None  # the sliding layers', when their base differs
        if config.positions == "rope":
            self.rotary = RotaryPositions(config.max_positions, config.rotary_dim, config.rope_theta)
            if config.rope_local_theta not in (None, config.rope_theta):
                self.local_rotary = RotaryPositions(config.max_positions, config.rotary_dim, config.rope_local_theta)
        self.sliding = [config.layer_type(i) == "sliding" for i in range(config.n_layers)]
        self.relative = relative_bias(config, bidirectional=False)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.n_layers))
        self.final_norm = (
            make_norm(config.norm, config.d_model, config.norm_eps) if config.final_norm else nn.Identity()
        )

    def forward(
        self,
        ids: torch.Tensor,  # (B, T): the new tokens only when a cache is used
        *,
        cache: KVCache | CacheBatch | None,
        memory: torch.Tensor | None,
        causal: bool,
    ) -> torch.Tensor:
        if isinstance(cache, CacheBatch):  # sessions of different lengths: (B, T) positions
            check_positions(max(cache.lengths), ids.shape[1], self.embed.max_positions)  # the longest fits
            positions = cache.new_positions(ids.shape[1], ids.device)
        else:
            start = cache.length if cache is not None else 0
            positions = check_positions(start, ids.shape[1], self.embed.max_positions, ids.device)
        x = self.embed(ids, positions)  # (B, T, d_model)
        rotary, bias = self.rotary_angles(positions), self.position_bias(positions, causal)
        for i, layer in enumerate(self.layers):
            x = layer(x, index=i, rotary=rotary[i], cache=cache, memory=memory, causal=causal, bias=bias)
        return x  # (B, T, d_model), before the final norm

    def position_bias(self, positions: torch.Tensor, causal: bool = True) -> torch.Tensor | None:
        """T5's (1, heads, T, keys) relative position bias for the new ``positions`` over every
        key so far (a whole pass without the mask: over every key of the text); None otherwise."""
        if self.relative is None:
            return None
        if positions.dim() == 2:
            raise ValueError("a batched step has no relative position bias; such a model steps alone")
        n_keys = int(positions[-1]) + 1 if causal else positions.shape[0]
        return self.relative(positions, n_keys)

    def rotary_angles(self, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor] | None]:
        """Each layer's rotary (cos, sin) for ``positions``, computed once per pass; None without
        rotary. Gemma 3's sliding layers rotate with a base of their own."""
        if self.rotary is None:
            return [None] * len(self.layers)
        full = self.rotary.angles(positions)
        local = self.local_rotary.angles(positions) if self.local_rotary is not None else full
        return [local if sliding else full for sliding in self.sliding]


class LanguageModel(nn.Module):
    """What both model kinds share: the token table, the decoder and the output head."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model)
        self.decoder = Decoder(config, self.embed_tokens)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.register_buffer("final_logits_bias", torch.zeros(config.vocab_size), persistent=True)
        if not config.final_logits_bias:
            self.final_logits_bias = None
        self.final_norm = Tap("residual")  # (B, T, d_model): the last residual, normed
        self.logits = Tap("logits")  # (B, T, vocab)
        self._taps: dict[str, Tap] = {}

    def taps(self) -> dict[str, Tap]:
        """Every tap by name (trace.py's table), named from the module tree on first use."""
        if not self._taps:
            self._taps = name_taps(self)
        return self._taps

    def tapped(self, record: Record, interventions: Sequence[Intervention], start: int = 0):
        """A trace for ``record``, and the context its pass runs in (see taps.tapping)."""
        taps = self.taps()
        for intervention in interventions:
            if intervention.tap not in taps:
                raise ValueError(f"{intervention.description}: this model has no tap {intervention.tap!r}")
        trace = Trace(record)
        return trace, tapping(trace, interventions, start)

    def new_cache(self) -> KVCache:
        """An empty cache in the model's one store (``paged.py``): every session's cache shares it."""
        return KVCache(self.config.n_layers, self.cache_store())

    def cache_store(self) -> PagedStore:
        """The store of every cache of this model: keys and values, per layer, in blocks."""
        c = self.config
        return store_of(self, "cache", {"keys": c.n_kv_heads, "values": c.n_kv_heads}, c.n_layers, c.head_dim)

    def record_store(self) -> PagedStore:
        """The store of what sessions keep for their heatmaps: the queries of every position."""
        c = self.config
        return store_of(self, "record", {"queries": c.n_heads}, c.n_layers, c.head_dim)

    def record_key_store(self) -> PagedStore:
        """The store of the keys sessions keep for their heatmaps where their cache does not hold
        them (a cache policy, the cache off): a session with the full cache reads its cache's."""
        c = self.config
        return store_of(self, "record keys", {"keys": c.n_kv_heads}, c.n_layers, c.head_dim)

    def unembed(self, residual: torch.Tensor) -> torch.Tensor:
        """Residual stream (..., d_model) -> vocabulary logits (..., vocab).

        Applied to the last layer's output this is the model's prediction; applied to an
        earlier layer's residual it is the "logit lens".
        """
        logits = self.lm_head(self.final_norm(self.decoder.final_norm(residual)) * self.config.output_scale)
        if self.final_logits_bias is not None:
            logits = logits + self.final_logits_bias
        return self.logits(logits)

    def _decode(
        self,
        ids: torch.Tensor,
        memory: torch.Tensor | None,
        cache: KVCache | None,
        record: Record,
        last_only: bool,
        causal: bool,
        interventions: Sequence[Intervention],
    ) -> Output:
        start = cache.length if isinstance(cache, KVCache) else 0
        if isinstance(cache, CacheBatch) and interventions:
            raise ValueError("a batched step runs sessions without interventions; a branch steps alone")
        trace, tapped = self.tapped(record, interventions, start=start)
        with tapped:
            hidden = self.decoder(ids, cache=cache, memory=memory, causal=causal)
            logits = self.unembed(hidden[:, -1:] if last_only else hidden)
        return Output(logits, trace)

    def finish_from(
        self,
        hidden: torch.Tensor,  # (B, T, d_model): the residual stream entering decoder layer ``layer``
        layer: int,
        memory: torch.Tensor | None = None,  # (B, S, d_model), for a translator
        interventions: Sequence[Intervention] = (),
    ) -> torch.Tensor:
        """The last position's logits (B, vocab), running the decoder layers from ``layer`` on only
        (a whole sequence, no cache). A change at layer L leaves every layer before it as it was,
        so activation patching reruns just this part."""
        positions = torch.arange(hidden.shape[1], device=hidden.device)
        rotary, bias = self.decoder.rotary_angles(positions), self.decoder.position_bias(positions)
        _, tapped = self.tapped(NOTHING, interventions)
        with tapped:
            for i in range(layer, len(self.decoder.layers)):
                hidden = self.decoder.layers[i](
                    hidden, index=i, rotary=rotary[i], cache=None, memory=memory, causal=True, bias=bias
                )  # fmt: skip
            return self.unembed(hidden[:, -1:])[:, -1]

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Load weights in our names, with errors that name what is missing or extra."""
        state_dict = dict(state_dict)
        # One tensor can live under several names (the token table is shared by both stacks
        # and, when tied, the output head): a checkpoint names it once, we fill the aliases.
        aliases: dict[int, list[str]] = {}
        for name, tensor in self.state_dict(keep_vars=True).items():
            aliases.setdefault(id(tensor), []).append(name)
        for names in aliases.values():
            given = next((state_dict[n] for n in names if n in state_dict), None)
            if given is not None:
                for n in names:
                    state_dict.setdefault(n, given)
        if self.final_logits_bias is None:
            state_dict.pop("final_logits_bias", None)
        result = self.load_state_dict(state_dict, strict=False)
        if result.missing_keys or result.unexpected_keys:
            raise ValueError(
                f"checkpoint does not fit the config: missing {result.missing_keys[:8]}, "
                f"unexpected {result.unexpected_keys[:8]}"
            )


class DecoderOnlyLM(LanguageModel):
    """GPT-2 and Llama: a stack of masked self-attention layers over the text so far."""

    def forward(
        self,
        ids: torch.Tensor,  # (B, T)
        cache: KVCache | CacheBatch | None = None,
        record: Record = NOTHING,
        last_only: bool = False,
        causal: bool = True,
        interventions: Sequence[Intervention] = (),
    ) -> Output:
        """Logits for every position of ``ids`` (only the last with ``last_only``).

        With a cache, ``ids`` are the new tokens: their keys and values join the cache and
        they attend over everything cached before them. ``causal=False`` removes the mask,
        which only the explorer's sandbox does, to show the future leaking. ``interventions``
        change named taps' tensors during the pass (see explorer/model/interventions.py), in any
        mix the experiment helpers return (ablate_heads' list beside ablate_sublayer's one).
        """
        return self._decode(ids, None, cache, record, last_only, causal, flat_interventions(interventions))


class EncoderDecoderLM(LanguageModel):
    """Marian: an encoder reads the source once; the decoder writes the target."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.encoder = Encoder(config, self.embed_tokens)

    def encode(
        self, source_ids: torch.Tensor, record: Record = NOTHING, interventions: Sequence[Intervention] = ()
    ) -> tuple[torch.Tensor, Trace]:
        """(B, S) source ids -> memory (B, S, d_model) and the encoder's trace; interventions on
        encoder taps apply here (those on decoder taps, in ``forward``)."""
        trace, tapped = self.tapped(record, interventions)
        with tapped:
            memory = self.encoder(source_ids)
        return memory, trace

    def forward(
        self,
        target_ids: torch.Tensor,  # (B, T)
        memory: torch.Tensor,  # (B, S, d_model) from encode()
        cache: KVCache | CacheBatch | None = None,
        record: Record = NOTHING,
        last_only: bool = False,
        causal: bool = True,
        interventions: Sequence[Intervention] = (),
    ) -> Output:
        return self._decode(target_ids, memory, cache, record, last_only, causal, flat_interventions(interventions))


def build_model(config: ModelConfig) -> LanguageModel:
    model = EncoderDecoderLM(config) if config.is_encoder_decoder else DecoderOnlyLM(config)
    return model.eval()
