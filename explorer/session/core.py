"""What a session holds and how it runs the model: the tokens so far, the cache, what attention is
computed from, the timings (``SessionCore``; ``generation.GenerationSession`` adds stepping,
undo and the sessions made from this one).

A session knows nothing about Gradio. Every token in ``token_ids`` has been run
through the model: the prompt in one pass when the session starts (the prefill), each
generated token right after it is chosen (``explorer/session/step.py``). So the distribution for
the next token is always ready, and the queries and keys of every token are kept for attention
(``explorer/session/attention_store.py``).

With the cache on, a step adds one query and one key per layer; with it off, a step reruns the
whole sequence and keeps only the new position's. Either way the attention matrix equals the one
a full forward pass gives (the tests check it).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch

from explorer.errors import InputError
from explorer.loading import LoadedModel
from explorer.model import ATTENTION, NOTHING, ContextWindowError, KVCache, Output, Record, Trace
from explorer.model.cache_policy import CachePolicy
from explorer.model.taps import Intervention, flat_interventions
from explorer.model.trace import residual_stream_names
from explorer.sampling import SamplingSettings, choose_token
from explorer.session.attention_store import SessionAttention, decoder_position_bias
from explorer.session.cache_plan import plan_for
from explorer.session.inputs import decoder_start_id, encode_input
from explorer.session.results import SessionFinished, StepResult, StepTiming, TopToken, timed
from explorer.tokens import continuation_texts, piece_texts

MAX_SESSION_POSITIONS = 1024  # the explorer's cap, so that one session's memory stays bounded


class SessionCore:
    """A session's state and passes; ``GenerationSession`` (generation.py) is the one to use."""

    def __init__(
        self,
        loaded: LoadedModel,
        text: str,
        use_cache: bool = True,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        chat: bool = False,
        record_attention: bool = True,
        n_top: int = 10,
        max_positions: int | None = None,
        interventions: Sequence[Intervention] = (),
        cache_policy: CachePolicy | None = None,
    ) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.config = loaded.config
        self.text = text
        self.chat = chat
        self.sampling = SamplingSettings(temperature, top_k, top_p, seed)
        # A pass keeps the queries and keys that attention is computed from on demand.
        self.record = Record.of("qk") if record_attention else NOTHING
        self.n_top = n_top
        cap = max_positions or MAX_SESSION_POSITIONS
        self.max_positions = min(cap, self.config.max_positions)
        # What every pass of this session changes at the model's taps (a branch: with_interventions).
        self.interventions = flat_interventions(interventions)
        self.use_cache = use_cache and not self.needs_whole_passes
        # How the cache is made, filled and taken back under its policy (explorer.cache_policies).
        self.cache_plan = plan_for(cache_policy, self.model, self.config, use_cache, self.interventions, self.record)
        self.record = self.cache_plan.record(self.record)
        self.cache: KVCache | None = None
        self.steps: list[StepResult] = []
        self.timings: list[StepTiming] = []
        self.source_ids: list[int] = []
        self.memory: torch.Tensor | None = None
        self.model_device = next(self.model.parameters()).device
        bias = functools.partial(decoder_position_bias, self.model.decoder, self.model_device)  # T5's
        self.attention = SessionAttention(self.config, self.max_positions, bias, self.model.record_store())
        self.attention.self_inputs.evictions = self.cache_plan.eviction_log
        self._next_logits: torch.Tensor | None = None  # (vocab,) for the next position
        self.newest_residuals: torch.Tensor | None = None  # (layers + 1, d_model): see take_in

        prompt_ids = encode_input(loaded, text, chat, self.max_positions)
        if self.is_encoder_decoder:
            self.source_ids = prompt_ids
            self._run_encoder()
            self.token_ids = [decoder_start_id(self.config)]
        else:
            self.token_ids = prompt_ids
        self.prompt_length = len(self.token_ids)
        self._token_texts = piece_texts(self.tokenizer, self.token_ids)  # kept in step with token_ids
        self._source_texts = piece_texts(self.tokenizer, self.source_ids)
        if self.use_cache:
            self.cache = self.new_cache()
        self.prefill_ms = self._process(self.prompt_length)

    # ------------------------------------------------------------------ the cache (cache_plan.py)
    @property
    def cache_policy(self) -> CachePolicy:
        """Which keys and values the cache keeps, and how precisely (the full cache by default)."""
        return self.cache_plan.policy

    def new_cache(self) -> KVCache:
        """An empty cache under this session's policy."""
        return self.cache_plan.new_cache()

    def rebuild_cache(self) -> None:
        """Run every token again into a new cache (an evicted entry cannot be taken back: undo
        under a policy replays the tokens kept)."""
        self.cache = self.new_cache()
        self.attention.truncate(0)
        self._process(len(self.token_ids))

    # ------------------------------------------------------------------ input
    @property
    def is_encoder_decoder(self) -> bool:
        return self.config.is_encoder_decoder

    def ids_tensor(self, ids: list[int]) -> torch.Tensor:
        """(1, len(ids)) on the model's device (a GPU when the loader found one)."""
        return torch.tensor([ids], device=self.model_device)

    @torch.inference_mode()
    def _run_encoder(self) -> None:
        record = ATTENTION if "qk" in self.record else NOTHING
        self.memory, trace = self.model.encode(self.ids_tensor(self.source_ids), record, self.interventions)
        if "attention" in record:
            self.attention.keep_encoder(trace)

    # ------------------------------------------------------------------ the model pass
    @torch.inference_mode()
    def run_decoder(self, ids: torch.Tensor, cache: KVCache | None = None, **kwargs):
        """The model's decoder over ``ids`` (1, T) with ``cache``; a translator's decoder also
        reads the encoder's memory of this session's source. Changes nothing in the session.
        The session's interventions apply unless ``interventions`` says otherwise."""
        kwargs.setdefault("interventions", self.interventions)
        if self.is_encoder_decoder:
            return self.model(ids, self.memory, cache=cache, **kwargs)
        return self.model(ids, cache=cache, **kwargs)

    @torch.inference_mode()
    def _forward(self, ids: torch.Tensor, **kwargs):
        """The session's own pass: through its cache, the last position's logits only."""
        return self.run_decoder(ids, self.cache, last_only=True, **kwargs)

    @torch.inference_mode()
    def full_pass(self, record: Record = NOTHING, causal: bool = True):
        """The whole sequence in one parallel (teacher-forced) pass, without the cache.

        Leaves the session as it was; the logit lens, the causal proof and its mask-free
        sandbox read this pass. Returns the model's Output: logits (1, T, vocab) and the trace.
        """
        return self.run_decoder(self.ids_tensor(self.token_ids), record=record, causal=causal)  # (1, T) in

    def _process(self, n_new: int) -> float:
        """Run the model so that the last ``n_new`` tokens are processed, and take in what it gave
        (the next distribution, their attention rows). Returns the passes' milliseconds."""
        total_ms = 0.0
        passes = self.cache_plan.passes(
            len(self.token_ids) - n_new, len(self.token_ids), self.prompt_length, self.use_cache
        )
        for start, end in passes[:-1]:  # under an evicting policy: the passes before the last
            output, elapsed_ms = self.pass_over(start, end)
            total_ms += elapsed_ms
            if "qk" in output.trace.record:
                self.attention.keep(output.trace, end - start)
        start, end = passes[-1]
        output, elapsed_ms = self.pass_over(start, end)
        self.absorb(output.logits[0, -1], output.trace, end - start)
        return total_ms + elapsed_ms

    def pass_over_newest(self, n_new: int) -> tuple[Output, float]:
        """The session's pass that processes its last ``n_new`` tokens, and its milliseconds."""
        return self.pass_over(len(self.token_ids) - n_new, len(self.token_ids))

    def pass_over(self, start: int, end: int) -> tuple[Output, float]:
        """The pass that processes tokens ``start`` .. ``end - 1``, and its milliseconds: with the
        cache (holding the tokens before ``start``), over those tokens only; without it, over the
        whole sequence to ``end`` again."""
        ids = self.token_ids[start:end] if self.use_cache else self.token_ids[:end]
        record = self.step_record(end - start)
        return timed(lambda: self._forward(self.ids_tensor(ids), record=record), self.model_device)

    def step_record(self, n_new: int) -> Record:
        """What a pass processing ``n_new`` tokens keeps. A one-token cached pass also keeps its
        residual stream, for the logit lens: a few kB. (A pass over many positions would hold
        every layer's (T, d_model) output to its end, so the prefill and cache-off steps leave the
        lens to run its own pass.)"""
        if self.use_cache and n_new == 1:
            return Record(self.record.kinds | {"residual"})
        return self.record

    def absorb(self, logits: torch.Tensor, trace: Trace, n_new: int) -> None:
        """Take in what the pass over the newest ``n_new`` tokens gave (``logits``: (vocab,) of the
        last position; ``trace``: batch 1): the next distribution, the rows the views need."""
        residuals = None
        if "residual" in trace.record:  # a one-token cached pass keeps it (step_record)
            names = residual_stream_names(self.config.n_layers)
            residuals = torch.stack([trace[name][0, -1] for name in names])  # (layers + 1, d)
        self.take_in(logits, residuals)
        if "qk" in trace.record:
            self.attention.keep(trace, n_new)

    def take_in(self, logits: torch.Tensor, residuals: torch.Tensor | None) -> None:
        """The next distribution's logits (vocab,) and the newest position's residual stream
        (layers + 1, d_model), or None (a batched step takes in its rows this way: step.py)."""
        self._next_logits = logits.cpu()  # sampling and the views work on the CPU
        # (layers + 1, d_model): the newest position's residual stream after the embeddings and
        # after each layer, kept from the pass that processed it (the logit lens reads it).
        self.newest_residuals = residuals

    # ------------------------------------------------------------------ stepping
    @property
    def finished(self) -> bool:
        eos = self.config.eos_token_id
        return len(self.token_ids) > self.prompt_length and self.token_ids[-1] == eos

    @property
    def generated_ids(self) -> list[int]:
        return self.token_ids[self.prompt_length :]

    @property
    def cache_bytes(self) -> int:
        return self.cache.nbytes if self.cache is not None else 0

    def next_token_probabilities(self) -> torch.Tensor:
        """(vocab,) the model's distribution for the next position."""
        return self._next_logits.float().softmax(-1)

    def next_logits(self) -> torch.Tensor:
        return self._next_logits.clone()

    def top_candidates(self, k: int | None = None) -> list[TopToken]:
        probs = self.next_token_probabilities()
        values, ids = probs.topk(k or self.n_top)
        ids = ids.tolist()
        texts = continuation_texts(self.tokenizer, self.token_ids, ids)
        return [TopToken(i, t, float(p)) for i, t, p in zip(ids, texts, values, strict=True)]

    def check_can_step(self) -> None:
        """Refuse a step past the end token or the session's room, saying what to do."""
        if self.finished:
            raise SessionFinished("The model has ended the text (it produced the end token). Undo or Reset to go on.")
        if len(self.token_ids) >= self.max_positions:
            raise ContextWindowError(
                f"The sequence has reached {self.max_positions:,} positions, the most this session holds "
                f"(model window {self.config.max_positions:,}). Undo some tokens or Reset."
            )

    def next_choice(self) -> int:
        """The token the next step takes: greedy, or sampled with this session's own settings and seed."""
        return choose_token(self._next_logits, self.sampling, position=len(self.token_ids))

    def set_sampling(self, temperature: float, top_k: int, top_p: float, seed: int) -> None:
        """How the next tokens are chosen; the tokens so far stay (they were chosen already)."""
        self.sampling = SamplingSettings(float(temperature), int(top_k), float(top_p), int(seed))

    @property
    def needs_whole_passes(self) -> bool:
        """Whether an intervention needs every position in each pass (a mean ablation): no cache then."""
        return any(i.whole_sequence for i in self.interventions)

    def set_use_cache(self, use_cache: bool) -> None:
        """Switch the cache; the tokens so far are kept (turning it on fills the cache once)."""
        if use_cache == self.use_cache:
            return
        self.cache_plan.refuse_cache_switch()
        if use_cache and self.needs_whole_passes:
            raise InputError("A mean ablation needs every position in each pass: this branch runs without the cache.")
        self.use_cache = use_cache
        if not use_cache:
            self.cache = None
            return
        self.cache = self.new_cache()
        self._forward(self.ids_tensor(self.token_ids))  # fills the cache

    # ------------------------------------------------------------------ attention views (attention_store.py)
    def self_attention(self, layer: int, first: int = 0, last: int | None = None) -> np.ndarray:
        """(heads, queries, T) decoder self-attention of the queries at positions first .. last - 1
        (by default every position: (heads, T, T)), computed now from the kept queries and keys."""
        self._require_attention_kept()
        return self.attention.self_attention(layer, first, last)

    def query_attention(self, position: int) -> np.ndarray:
        """(layers, heads, position + 1) what the token at ``position`` read, in every layer."""
        self._require_attention_kept()
        return self.attention.query_attention(position, len(self.token_ids))

    def _require_attention_kept(self) -> None:
        self.cache_plan.refuse_views()

    def evicted(self, layer: int, first: int = 0, last: int | None = None) -> np.ndarray | None:
        """(kv_heads, queries, T) True where the cache policy had evicted the key before the query
        at that row ran (for the queries at positions first .. last - 1); None without eviction."""
        n = len(self.token_ids)
        return self.cache_plan.evicted(layer, first, n if last is None else last, n)

    def cross_attention(self, layer: int) -> np.ndarray:
        """(heads, T, S) cross-attention of every target token over the source."""
        return self.attention.cross_attention(layer)

    def encoder_attention(self, layer: int) -> np.ndarray:
        """(heads, S, S) encoder self-attention over the source."""
        return self.attention.encoder_attention(layer)

    # ------------------------------------------------------------------ text
    def token_texts(self) -> list[str]:
        """What each token of ``token_ids`` shows as text (byte pieces as their bytes)."""
        return list(self._token_texts)

    def source_texts(self) -> list[str]:
        return list(self._source_texts)

    def token_kinds(self) -> list[str]:
        """Where each token of ``token_ids`` came from: "prompt" (a decoder's input), "start" (a
        translator's start token), "generated" (the model's choice) or "forced" (the user's)."""
        forced = {s.position for s in self.steps if s.forced}
        given = "start" if self.is_encoder_decoder else "prompt"
        kinds = [given] * self.prompt_length
        kinds += ["forced" if i in forced else "generated" for i in range(self.prompt_length, len(self.token_ids))]
        return kinds

    def generated_text(self) -> str:
        return self.tokenizer.decode(self.generated_ids, skip_special_tokens=True)

    # ------------------------------------------------------------------ interventions
