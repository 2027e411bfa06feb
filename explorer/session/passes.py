"""How a session runs the model: the encoder once (a translator), the decoder over new tokens
through its cache (or, cache off, over everything again), and what it takes in from each pass
(the next distribution, the newest residual stream, the queries and keys the views are computed
from). ``SessionPasses`` is a part of ``SessionCore`` (core.py); it changes no token.
"""

from __future__ import annotations

import torch

from explorer.admission import PREFILL_CHUNK, between_chunks
from explorer.errors import InputError
from explorer.model import ATTENTION, NOTHING, KVCache, Output, Record, Trace
from explorer.model.paged import PagedSequence
from explorer.model.trace import residual_stream_names
from explorer.session.results import timed


class SessionPasses:
    """The passes of a session (``SessionCore`` holds the state they read and write)."""

    def new_cache(self) -> KVCache:
        """An empty cache under this session's policy."""
        return self.cache_plan.new_cache()

    def rebuild_cache(self) -> None:
        """Run every token again into a new cache (an evicted entry cannot be taken back: undo
        under a policy replays the tokens kept)."""
        self.cache = self.new_cache()
        self.attention.truncate(0)
        self._process(len(self.token_ids))

    @torch.inference_mode()
    def _run_encoder(self) -> None:
        record = ATTENTION if "qk" in self.record else NOTHING
        self.memory, trace = self.model.encode(self.ids_tensor(self.source_ids), record, self.interventions)
        if "attention" in record:
            self.attention.keep_encoder(trace)

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
        since_yield = 0
        for start, end in passes[:-1]:  # a long prefill's chunks; under an evicting policy, one a token
            output, elapsed_ms = self.pass_over(start, end)
            total_ms += elapsed_ms
            if "qk" in output.trace.record:
                self.attention.keep(output.trace, end - start, self.held_keys())
            since_yield += end - start
            if since_yield >= PREFILL_CHUNK:  # inside a heavy job: Steps first, stop if its client left
                between_chunks()
                since_yield = 0
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
            self.attention.keep(trace, n_new, self.held_keys())

    def held_keys(self) -> PagedSequence | None:
        """The cache's sequence when it holds the very keys the heatmaps read (the full cache in
        the model's store; no intervention at the taps): the kept rows read their keys there
        instead of keeping a copy (``PagedKept``). None otherwise."""
        cache = self.cache
        if type(cache) is not KVCache or cache.store is not self.model.cache_store() or self.interventions:
            return None
        return cache.sequence

    def take_in(self, logits: torch.Tensor, residuals: torch.Tensor | None) -> None:
        """The next distribution's logits (vocab,) and the newest position's residual stream
        (layers + 1, d_model), or None (a batched step takes in its rows this way: step.py)."""
        self._next_logits = logits.cpu()  # sampling and the views work on the CPU
        # (layers + 1, d_model): the newest position's residual stream after the embeddings and
        # after each layer, kept from the pass that processed it (the logit lens reads it).
        self.newest_residuals = residuals

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
