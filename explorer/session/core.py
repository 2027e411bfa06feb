"""What a session holds: a user's text, settings, tokens so far and history, the cache (made,
filled and taken back as its ``cache_plan.py`` says), what attention is computed from, the
timings (``SessionCore``; ``passes.py`` runs the model for it, ``reading.py`` reads what it kept,
and ``generation.GenerationSession`` adds stepping, undo and the sessions made from this one).

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
from typing import NamedTuple

import torch

from explorer.loading import LoadedModel
from explorer.model import NOTHING, ContextWindowError, KVCache, Record
from explorer.model.cache_policy import CachePolicy
from explorer.model.taps import Intervention, flat_interventions
from explorer.sampling import SamplingSettings, choose_token
from explorer.session.attention_store import SessionAttention, decoder_position_bias
from explorer.session.cache_plan import plan_for
from explorer.session.inputs import decoder_start_id, encode_input
from explorer.session.passes import SessionPasses
from explorer.session.reading import SessionReading
from explorer.session.results import SessionFinished, StepResult, StepTiming, TopToken
from explorer.tokens import continuation_texts, piece_texts

MAX_SESSION_POSITIONS = 1024  # the explorer's cap, so that one session's memory stays bounded


class KnownTop(NamedTuple):
    """A session's top candidates, and what they were found from: its logits (the very tensor;
    a new pass makes a new one), its length then, and how many were asked for."""

    logits: torch.Tensor
    length: int
    k: int
    candidates: tuple[TopToken, ...]

    def of(self, logits: torch.Tensor, length: int, k: int) -> bool:
        return self.logits is logits and (self.length, self.k) == (length, k)


class SessionCore(SessionPasses, SessionReading):
    """A session's state, its passes and its reads; ``GenerationSession`` (generation.py) is the one to use."""

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
        loaded.used_by(self)  # the model stays loaded while this session lives (explorer.present.model_store)
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
        self.attention = SessionAttention(
            self.config, self.max_positions, bias, self.model.record_store(), self.model.record_key_store()
        )
        self.attention.self_inputs.evictions = self.cache_plan.eviction_log
        self._next_logits: torch.Tensor | None = None  # (vocab,) for the next position
        self._top_known: KnownTop | None = None  # see top_candidates
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

    # ------------------------------------------------------------------ input
    @property
    def is_encoder_decoder(self) -> bool:
        return self.config.is_encoder_decoder

    def ids_tensor(self, ids: list[int]) -> torch.Tensor:
        """(1, len(ids)) on the model's device (a GPU when the loader found one)."""
        return torch.tensor([ids], device=self.model_device)

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

    def held_bytes(self) -> int:
        """What this session holds beyond the model: its cache and its attention's kept queries,
        keys and computed rows (explorer.present.session_keeper budgets it)."""
        return self.cache_bytes + self.attention.held_bytes

    def next_token_probabilities(self) -> torch.Tensor:
        """(vocab,) the model's distribution for the next position."""
        return self._next_logits.float().softmax(-1)

    def next_logits(self) -> torch.Tensor:
        return self._next_logits.clone()

    def top_candidates(self, k: int | None = None) -> list[TopToken]:
        """The k most likely next tokens and the text each would add. Kept until the next
        position's logits come: the page shows them after a step, and the next step records
        them as the distribution its token was chosen from (the server's Python, once)."""
        k = k or self.n_top
        if not self.knows_top(k):
            values, ids = self.next_token_probabilities().topk(k)
            self.know_top(k, values, ids)
        return list(self._top_known.candidates)

    def knows_top(self, k: int) -> bool:
        """Whether the top k candidates for the next token are known already."""
        known = self._top_known
        return known is not None and known.of(self._next_logits, len(self.token_ids), k)

    def know_top(self, k: int, values: torch.Tensor, ids: torch.Tensor, texts: list[str] | None = None) -> None:
        """Keep the top k probabilities ``values`` (k,) of the next token and their ``ids`` (k,);
        ``texts``: what each adds after the tokens so far, where a batch decoded them already."""
        ids = ids.tolist()
        texts = texts if texts is not None else continuation_texts(self.tokenizer, self.token_ids, ids)
        top = tuple(TopToken(i, t, float(p)) for i, t, p in zip(ids, texts, values, strict=True))
        self._top_known = KnownTop(self._next_logits, len(self.token_ids), k, top)

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
