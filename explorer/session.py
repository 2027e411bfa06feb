"""One user's generation: the tokens so far, the cache, what attention is computed from, the timings.

``GenerationSession`` knows nothing about Gradio. Every token in ``token_ids`` has been run
through the model: the prompt in one pass when the session starts (the prefill), each
generated token right after it is chosen. So the distribution for the next token is
always ready, and the queries and keys of every token are kept for attention.

Attention is computed on demand. Each pass keeps, per layer, the queries and keys of the
positions it processed (as the model used them, after rotary): O(T·d) per layer, like the KV
cache. A view computes softmax(q kᵀ/√d + mask) for the layer it shows, when it shows it,
instead of every pass recording T x T x heads for every layer; so the passes run PyTorch's
fused attention kernel. With the cache on, a step adds one query and one key per layer; with
it off, a step reruns the whole sequence and keeps only the new position's. Either way the
matrix equals the one a full forward pass gives (the tests check it).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from explorer.errors import InputError
from explorer.loading import LoadedModel
from explorer.model import ATTENTION, NOTHING, ContextWindowError, KVCache, Record, Trace
from explorer.model.attention import attention_weights, causal_mask
from explorer.model.cache import grown_capacity
from explorer.model.taps import Intervention, flat_interventions
from explorer.model.trace import residual_stream_names
from explorer.sampling import SamplingSettings, choose_token
from explorer.tokens import continuation_texts, piece_text, piece_texts

MAX_SESSION_POSITIONS = 1024  # the explorer's cap, so that one session's memory stays bounded
MAX_TEXT_CHARS = 100_000


class SessionFinished(InputError):
    pass


@dataclass
class TopToken:
    token_id: int
    text: str
    probability: float  # the model's own probability (softmax of the logits, temperature 1)


@dataclass
class StepResult:
    token_id: int
    token_text: str
    position: int  # where the token stands in ``token_ids``
    elapsed_ms: float  # the model pass that processed this token
    cache_bytes: int
    use_cache: bool
    top_k: list[TopToken]  # the distribution this token was chosen from, most probable first
    trace: Trace = field(repr=False)  # what this step's pass recorded (the session's own list drops it)
    forced: bool = False
    finished: bool = False


@dataclass
class StepTiming:
    position: int
    elapsed_ms: float
    use_cache: bool


@dataclass
class CacheComparison:
    """The same generation run twice, cache on and cache off, measured in one go."""

    positions: list[int]
    ms_cached: list[float]
    ms_uncached: list[float]
    tokens_cached: list[int]
    tokens_uncached: list[int]
    max_logit_difference: float
    cache_bytes: int
    token_ids: list[int]  # the session's sequence that was rerun

    @property
    def tokens_identical(self) -> bool:
        return self.tokens_cached == self.tokens_uncached


class GrowingRows:
    """(heads, rows, head_dim) rows that grow along axis 1, in a buffer with room to spare
    (grown by a quarter when full, up to ``limit`` rows), like the KV cache's, so that a step
    writes one row instead of copying them all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer: torch.Tensor | None = None
        self.length = 0

    def add(self, block: torch.Tensor) -> None:
        """Copy ``block`` (heads, new, hd) in after the rows so far (a copy: the pass's keys
        may be the KV cache's own buffer, which undo overwrites)."""
        end = self.length + block.shape[1]
        if self.buffer is None or end > self.buffer.shape[1]:
            capacity = max(end, min(grown_capacity(end), self.limit))
            grown = block.new_empty((block.shape[0], capacity, block.shape[2]))
            if self.buffer is not None:
                grown[:, : self.length] = self.buffer[:, : self.length]
            self.buffer = grown
        self.buffer[:, self.length : end] = block
        self.length = end

    def all(self) -> torch.Tensor:
        """(heads, rows, hd): a view of the rows so far."""
        return self.buffer[:, : self.length]

    def truncate(self, rows: int) -> None:
        self.length = min(self.length, rows)

    @property
    def nbytes(self) -> int:
        return 0 if self.buffer is None else self.buffer.nbytes


class AttentionRows:
    """One layer's attention probabilities computed so far, (heads, rows, keys), grown row by row.

    A row never changes once computed: row i is softmax(q_i kᵀ/√d) over keys that are fixed
    (the source's, for cross-attention) or that are its own past (causal self-attention, whose
    later keys it gives exactly zero weight). So after a step only the new row is computed:
    O(T) per step instead of O(T²). Undo forgets the rows it removed, in a fresh buffer, so
    that an array handed out before never changes under its holder.
    """

    def __init__(self, heads: int, keys_fixed: int | None, limit: int) -> None:
        self.heads, self.limit = heads, limit  # at most ``limit`` rows (the session's cap)
        self.keys_fixed = keys_fixed  # the source length (cross-attention), or None (keys grow with rows)
        self.buffer = np.zeros((heads, 0, keys_fixed or 0), dtype=np.float32)
        self.rows = 0

    def extend(self, new_rows: np.ndarray) -> None:
        """Append (heads, n, keys) rows, keys being the row count after them (causal) or fixed."""
        end = self.rows + new_rows.shape[1]
        if end > self.buffer.shape[1]:
            capacity = max(end, min(2 * self.buffer.shape[1], self.limit))
            grown = np.zeros((self.heads, capacity, self.keys_fixed or capacity), dtype=np.float32)
            grown[:, : self.rows, : self.buffer.shape[2]] = self.buffer[:, : self.rows]
            self.buffer = grown
        self.buffer[:, self.rows : end, : new_rows.shape[2]] = new_rows
        self.rows = end

    def truncate(self, rows: int) -> None:
        if rows < self.rows:
            kept = np.zeros_like(self.buffer)
            kept[:, :rows] = self.buffer[:, :rows]
            self.buffer, self.rows = kept, rows

    def view(self, first: int, last: int, n_keys: int) -> np.ndarray:
        out = self.buffer[:, first:last, :n_keys]
        out.flags.writeable = False  # shared by the views that ask for it
        return out


class AttentionInputs:
    """What one attention stack's probabilities are made of, per layer: the queries
    (heads, T, head_dim) of every position so far, and the keys (kv_heads, keys, head_dim)
    they read. Self-attention's keys grow with the queries (and are masked causally);
    cross-attention's are the source's, fixed.

    The probabilities of the layer a view asked for last are kept (``AttentionRows``), so that
    the next step computes only its new row: (heads, T, T) float32, 38 MB for SmolLM2 at 1,024
    positions. (The heatmap and the all-heads image show one layer; a view of every layer
    computes each in turn.)"""

    def __init__(
        self,
        n_layers: int,
        causal: bool,
        max_rows: int,
        scale: float,
        windows: list[int | None] | None = None,
        position_bias: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
    ) -> None:
        self.causal, self.max_rows, self.scale = causal, max_rows, scale  # scale: ModelConfig.score_scale
        self.windows = windows or [None] * n_layers  # each layer's sliding window (ModelConfig.window_of)
        self.position_bias = position_bias  # query positions -> (1, heads, Tq, keys): T5's relative positions
        self.queries = [GrowingRows(max_rows) for _ in range(n_layers)]
        self.keys = [GrowingRows(max_rows) for _ in range(n_layers)]
        self._kept: tuple[int, AttentionRows] | None = None  # (layer, its rows) a view asked for last

    @property
    def rows(self) -> int:
        return self.queries[0].length if self.queries else 0

    @property
    def nbytes(self) -> int:
        """Bytes held for the queries and keys (with the buffers' room to grow)."""
        return sum(rows.nbytes for rows in (*self.queries, *self.keys))

    def add(self, layer: int, queries: torch.Tensor, keys: torch.Tensor | None) -> None:
        """queries (heads, new, hd) of the new positions; keys (kv_heads, new, hd) of the same
        positions (self-attention), or of the whole source the first time (cross-attention;
        None after that)."""
        self.queries[layer].add(queries)
        if self.causal or not self.keys[layer].length:
            if keys is None:
                raise ValueError("the source's keys are needed the first time")
            self.keys[layer].add(keys)

    def truncate(self, rows: int) -> None:
        for queries in self.queries:
            queries.truncate(rows)
        if self.causal:
            for keys in self.keys:
                keys.truncate(rows)
        if self._kept is not None:
            self._kept[1].truncate(rows)

    def compute(self, layer: int, first: int, last: int) -> np.ndarray:
        """(heads, last - first, keys) float32 for the queries at positions first .. last - 1,
        computed now from the kept queries and keys (nothing is kept)."""
        q = self.queries[layer].all()[:, first:last]  # (heads, Tq, hd)
        keys = self.keys[layer].all()  # (kv_heads, Tk, hd)
        if self.causal:
            keys = keys[:, :last]  # a query's future keys get zero weight: not needed
        mask = None
        if self.causal:
            mask = causal_mask(q.shape[1], keys.shape[1], q.device, first_query=first, window=self.windows[layer])
        bias = None
        if self.position_bias is not None:
            bias = self.position_bias(torch.arange(first, last, device=q.device))  # (1, heads, Tq, last)
        return attention_weights(q[None].float(), keys[None].float(), mask, self.scale, bias)[0].cpu().numpy()

    def probabilities(self, layer: int, first: int = 0, last: int | None = None) -> np.ndarray:
        """(heads, queries, keys) float32 for the queries at positions first .. last - 1, every key
        (a causal row's future is 0); the rows not computed before are computed now."""
        if not self.queries[layer].length:
            raise InputError("no attention was recorded in this session")
        rows, n_keys = self.rows, self.keys[layer].length
        if self._kept is None or self._kept[0] != layer:  # another layer: its rows from the start
            heads = self.queries[layer].all().shape[0]
            self._kept = (layer, AttentionRows(heads, None if self.causal else n_keys, self.max_rows))
        computed = self._kept[1]
        if computed.rows < rows:
            computed.extend(self.compute(layer, computed.rows, rows))
        return computed.view(first, rows if last is None else last, n_keys)


def decoder_position_bias(decoder, device, query_positions: torch.Tensor) -> torch.Tensor | None:
    """The decoder's relative position bias (1, heads, Tq, keys) for queries at these positions
    over the keys up to the last of them (T5); None for other families.

    A function of the decoder, not a method of the session: a session keeping its own bound
    method would be a reference cycle, and the session's tensors (tens of MB) would wait for
    Python's rare full garbage collection instead of going when its last reference does."""
    return decoder.position_bias(query_positions.to(device))


class GenerationSession:
    """Step through generation one token at a time; see what the model did at each step."""

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
        self.cache: KVCache | None = None
        self.steps: list[StepResult] = []
        self.timings: list[StepTiming] = []
        self.source_ids: list[int] = []
        self.memory: torch.Tensor | None = None
        self.model_device = next(self.model.parameters()).device
        self.encoder_probs: list[np.ndarray] = []  # per layer (heads, S, S): small, computed once
        n_cross = self.config.n_layers if self.is_encoder_decoder else 0
        windows = [self.config.window_of(i) for i in range(self.config.n_layers)]
        scale = self.config.score_scale
        self.self_inputs = AttentionInputs(
            self.config.n_layers, True, self.max_positions, scale, windows,
            functools.partial(decoder_position_bias, self.model.decoder, self.model_device),
        )  # fmt: skip
        self.cross_inputs = AttentionInputs(n_cross, causal=False, max_rows=self.max_positions, scale=scale)
        self._next_logits: torch.Tensor | None = None  # (vocab,) for the next position
        # (layers + 1, d_model): the newest position's residual stream after the embeddings and
        # after each layer, kept from the pass that processed it (the logit lens reads it).
        self.newest_residuals: torch.Tensor | None = None

        prompt_ids = self._encode_input(text)
        if self.is_encoder_decoder:
            self.source_ids = prompt_ids
            self._run_encoder()
            self.token_ids = [self._decoder_start_id()]
        else:
            self.token_ids = prompt_ids
        self.prompt_length = len(self.token_ids)
        self._token_texts = piece_texts(self.tokenizer, self.token_ids)  # kept in step with token_ids
        self._source_texts = piece_texts(self.tokenizer, self.source_ids)
        if self.use_cache:
            self.cache = self.model.new_cache()
        self.prefill_ms, _ = self._process(self.prompt_length)

    # ------------------------------------------------------------------ input
    @property
    def is_encoder_decoder(self) -> bool:
        return self.config.is_encoder_decoder

    def _encode_input(self, text: str) -> list[int]:
        what = "source sentence" if self.is_encoder_decoder else "prompt"
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"The {what} is empty: type some text, or pick an example.")
        if len(text) > MAX_TEXT_CHARS:
            raise InputError(
                f"The {what} has {len(text):,} characters; the explorer takes at most {MAX_TEXT_CHARS:,}. Shorten it."
            )
        text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot be tokenized
        if self.chat and not self.is_encoder_decoder:
            if not self.loaded.has_chat_template:
                raise InputError("This model has no chat template; switch the chat template off.")
            rendered = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
            )
            ids = self.tokenizer(rendered, add_special_tokens=False)["input_ids"]
        else:
            ids = self.tokenizer(text)["input_ids"]
        if self.is_encoder_decoder:
            limit = self.config.max_positions  # the encoder's own window
        else:
            limit = self.max_positions - 1  # leave room for at least one new token
        if len(ids) > limit:
            raise InputError(
                f"The {what} is {len(ids):,} tokens long; this model and explorer take at most {limit:,} "
                f"(context window {self.config.max_positions:,}, explorer cap {self.max_positions:,}). "
                "Shorten it."
            )
        if not ids:
            raise InputError(f"The {what} produced no tokens; type some words.")
        return ids

    def _decoder_start_id(self) -> int:
        start = self.config.decoder_start_token_id
        return start if start is not None else self.config.pad_token_id

    def ids_tensor(self, ids: list[int]) -> torch.Tensor:
        """(1, len(ids)) on the model's device (a GPU when the loader found one)."""
        return torch.tensor([ids], device=self.model_device)

    @torch.inference_mode()
    def _run_encoder(self) -> None:
        src = self.ids_tensor(self.source_ids)
        record = ATTENTION if "qk" in self.record else NOTHING
        self.memory, trace = self.model.encode(src, record=record, interventions=self.interventions)
        if "attention" in record:
            for i in range(self.config.n_encoder_layers):
                self.encoder_probs.append(trace.self_attention(i, "encoder")[0].float().cpu().numpy())

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

    def _process(self, n_new: int) -> tuple[float, Trace]:
        """Run the model so that the last ``n_new`` tokens are processed; keep their rows.

        Sets the distribution for the next position. Returns (milliseconds, trace).
        """
        record = self.step_record(n_new)
        if self.use_cache:
            ids = self.ids_tensor(self.token_ids[-n_new:])  # (1, n_new): only the new tokens
        else:
            ids = self.ids_tensor(self.token_ids)  # (1, T): everything again
        start = time.perf_counter()
        output = self._forward(ids, record=record)
        if ids.is_cuda:
            torch.cuda.synchronize()  # GPU kernels run asynchronously: wait before reading the clock
        elapsed_ms = (time.perf_counter() - start) * 1000
        self.absorb(output.logits[0, -1], output.trace, n_new)
        return elapsed_ms, output.trace

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
        self._next_logits = logits.cpu()  # sampling and the views work on the CPU
        self.newest_residuals = None
        if "residual" in trace.record:  # a one-token cached pass keeps it (step_record)
            names = residual_stream_names(self.config.n_layers)
            self.newest_residuals = torch.stack([trace[name][0, -1] for name in names])  # (layers + 1, d)
        if "qk" in trace.record:
            self._keep_attention_inputs(trace, n_new)

    def _keep_attention_inputs(self, trace: Trace, n_new: int) -> None:
        """The new positions' queries, and the keys they added, of every layer (see AttentionInputs)."""
        for i in range(self.config.n_layers):
            name = f"decoder.{i}.self_attn"
            self.self_inputs.add(i, trace[f"{name}.q"][0, :, -n_new:], trace[f"{name}.k"][0, :, -n_new:])
            if self.is_encoder_decoder:
                name = f"decoder.{i}.cross_attn"
                # The source's keys are kept once, from the prefill (a batched step does not pass them).
                keys = trace[f"{name}.k"][0] if f"{name}.k" in trace else None
                self.cross_inputs.add(i, trace[f"{name}.q"][0, :, -n_new:], keys)

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

    def step(self) -> StepResult:
        """Choose the next token (greedy or sampled), append it, and run the model on it."""
        self.check_can_step()
        return self._append(self.next_choice(), forced=False)

    def next_choice(self) -> int:
        """The token the next step takes: greedy, or sampled with this session's own settings and seed."""
        return choose_token(self._next_logits, self.sampling, position=len(self.token_ids))

    @property
    def can_join_batch(self) -> bool:
        """Whether this session's next step may run in a batch with other sessions' (batching.py):
        a cached one-token step, under no intervention, of a model without relative positions
        (each row of a batch would need its own bias: T5 steps alone)."""
        relative = self.config.positions == "relative"
        return self.use_cache and self.cache is not None and not self.interventions and not relative

    def force(self, token_id: int) -> StepResult:
        """Append ``token_id`` instead of the model's choice (a branch); Undo goes back."""
        self._check_token(token_id)  # first: a token that cannot exist is refused in any state
        self.check_can_step()
        return self._append(int(token_id), forced=True)

    def append_recorded(self, token_id: int, forced: bool) -> StepResult:
        """Append a token that an earlier run chose (a saved session or a shared link being
        restored), keeping whether the user had forced it."""
        self._check_token(token_id)
        self.check_can_step()
        return self._append(int(token_id), forced=forced)

    def _check_token(self, token_id: int) -> None:
        if not 0 <= int(token_id) < self.config.vocab_size:
            raise InputError(f"token id {token_id} is outside the vocabulary (0 to {self.config.vocab_size - 1})")

    def replay(self, token_ids: list[int], forced: set[int] | frozenset[int] = frozenset()) -> None:
        """Append generated tokens an earlier run chose, each run through the model; the
        tokens at the indices in ``forced`` are marked as the user's own choice. Refuses,
        before running anything, a list that could not have come from this model."""
        room = self.max_positions - len(self.token_ids)
        if len(token_ids) > room:
            raise InputError(
                f"It holds {len(token_ids):,} generated tokens; this explorer holds at most "
                f"{self.max_positions:,} positions in all."
            )
        vocab = self.config.vocab_size
        for i, token in enumerate(token_ids):
            if not 0 <= token < vocab:
                raise InputError(
                    f"Its generated token {i} is id {token}, outside this model's vocabulary (0 to {vocab - 1}): "
                    "it was altered, or made for another model."
                )
        for i, token in enumerate(token_ids):
            if self.finished:
                raise InputError(f"Its tokens go on after the model's end token (generated token {i}): it was altered.")
            self.append_recorded(token, forced=i in forced)

    def replace_last(self, token_id: int) -> StepResult:
        """Put ``token_id`` in place of the last generated token (undo, then force it)."""
        if len(self.token_ids) <= self.prompt_length:
            raise InputError("There is no generated token to replace: Step first.")
        self.undo()
        return self.force(token_id)

    def set_sampling(self, temperature: float, top_k: int, top_p: float, seed: int) -> None:
        """How the next tokens are chosen; the tokens so far stay (they were chosen already)."""
        self.sampling = SamplingSettings(float(temperature), int(top_k), float(top_p), int(seed))

    def _append(self, token: int, forced: bool) -> StepResult:
        top = self.begin_append(token)
        elapsed_ms, trace = self._process(1)
        return self.finish_append(token, forced, top, elapsed_ms, trace)

    def begin_append(self, token: int) -> list[TopToken]:
        """Put ``token`` at the end, before the pass that processes it; returns the candidates it
        was chosen from."""
        top = self.top_candidates()
        self.token_ids.append(token)
        return top

    def finish_append(
        self, token: int, forced: bool, top: list[TopToken], elapsed_ms: float, trace: Trace
    ) -> StepResult:
        """Record the step, once the pass that processed ``token`` has been absorbed."""
        position = len(self.token_ids) - 1
        self.timings.append(StepTiming(position, elapsed_ms, self.use_cache))
        self._token_texts.append(piece_text(self.tokenizer, self.token_ids, position))
        result = StepResult(
            token_id=token,
            token_text=self._token_texts[-1],
            position=position,
            elapsed_ms=elapsed_ms,
            cache_bytes=self.cache_bytes,
            use_cache=self.use_cache,
            top_k=top,
            trace=trace,
            forced=forced,
            finished=self.finished,
        )
        # The session keeps each step's result without its trace: a step's attention is already
        # kept as queries and keys, and a copy of its probabilities per step would grow quadratically.
        self.steps.append(replace(result, trace=Trace()))
        return result

    def undo(self) -> None:
        """Remove the last generated token (never the prompt)."""
        if len(self.token_ids) <= self.prompt_length:
            raise InputError("Nothing to undo: only the prompt is left.")
        self.token_ids.pop()
        self._token_texts.pop()
        self.steps.pop()
        self.timings.pop()
        # The distribution for the next position came from processing the token now last;
        # rerun that one token (its attention row is dropped and recorded again).
        n = len(self.token_ids)
        self.self_inputs.truncate(n - 1)
        self.cross_inputs.truncate(n - 1)
        if self.cache is not None:
            self.cache.truncate(n - 1)
        self._process(1)

    @property
    def needs_whole_passes(self) -> bool:
        """Whether an intervention needs every position in each pass (a mean ablation): no cache then."""
        return any(i.whole_sequence for i in self.interventions)

    def set_use_cache(self, use_cache: bool) -> None:
        """Switch the cache; the tokens so far are kept (turning it on fills the cache once)."""
        if use_cache == self.use_cache:
            return
        if use_cache and self.needs_whole_passes:
            raise InputError("A mean ablation needs every position in each pass: this branch runs without the cache.")
        self.use_cache = use_cache
        if not use_cache:
            self.cache = None
            return
        self.cache = self.model.new_cache()
        self._forward(self.ids_tensor(self.token_ids))  # fills the cache

    # ------------------------------------------------------------------ attention views
    def self_attention(self, layer: int, first: int = 0, last: int | None = None) -> np.ndarray:
        """(heads, queries, T) decoder self-attention of the queries at positions first .. last - 1
        (by default every position: (heads, T, T)), computed now from the kept queries and keys."""
        self.check_layer(layer)
        return self.self_inputs.probabilities(layer, first, last)

    def query_attention(self, position: int) -> np.ndarray:
        """(layers, heads, position + 1) what the token at ``position`` read, in every layer."""
        if not 0 <= position < len(self.token_ids):
            raise InputError(f"position {position} does not exist; choose 0 to {len(self.token_ids) - 1}")
        rows = [self.self_inputs.compute(i, position, position + 1)[:, 0] for i in range(self.config.n_layers)]
        return np.stack(rows)  # (layers, heads, position + 1): the future is not computed

    def cross_attention(self, layer: int) -> np.ndarray:
        """(heads, T, S) cross-attention of every target token over the source."""
        self.require_translator("cross-attention")
        self.check_layer(layer)
        return self.cross_inputs.probabilities(layer)

    def encoder_attention(self, layer: int) -> np.ndarray:
        """(heads, S, S) encoder self-attention over the source."""
        self.require_translator("encoder attention")
        if not 0 <= layer < self.config.n_encoder_layers:
            raise InputError(f"encoder layer {layer} does not exist; choose 0 to {self.config.n_encoder_layers - 1}")
        if not self.encoder_probs:
            raise InputError("no attention was recorded in this session")
        return self.encoder_probs[layer]

    def check_layer(self, layer: int) -> None:
        """Refuse a decoder layer the model does not have, saying which exist."""
        if not 0 <= layer < self.config.n_layers:
            raise InputError(f"layer {layer} does not exist; choose 0 to {self.config.n_layers - 1}")

    def require_translator(self, what: str) -> None:
        if not self.is_encoder_decoder:
            raise InputError(f"{what} exists only for translators (encoder-decoder models)")

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

    def started_again(self, **changes) -> GenerationSession:
        """A new session of this text with this session's settings (and interventions), but for
        ``changes`` (``text`` among them: another text); no token generated yet."""
        s = self.sampling
        settings = dict(
            use_cache=self.use_cache, chat=self.chat, record_attention="qk" in self.record,
            max_positions=self.max_positions, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, seed=s.seed,
            interventions=self.interventions,
        )  # fmt: skip
        text = changes.pop("text", self.text)
        return GenerationSession(self.loaded, text, **(settings | changes))

    # ------------------------------------------------------------------ interventions
    def with_interventions(self, interventions: Sequence[Intervention]) -> GenerationSession:
        """A branch: a new session whose passes make these changes at the model's taps, with this
        session's text, settings and tokens, each token rerun under them (forced ones stay
        marked). It steps on from there under the interventions; this session is untouched."""
        branch = self.started_again(interventions=interventions, n_top=self.n_top)
        forced = {s.position - self.prompt_length for s in self.steps if s.forced}
        branch.replay(self.generated_ids, forced=forced)
        return branch

    @torch.inference_mode()
    def tap_values(self, tap: str) -> torch.Tensor:
        """One tap's tensor over this session's whole sequence, in one pass under its
        interventions (an encoder tap: over the source); what a patch takes from another run."""
        record = Record.taps(tap)
        if tap.startswith("encoder."):
            _, trace = self.model.encode(
                self.ids_tensor(self.source_ids), record=record, interventions=self.interventions
            )
        else:
            trace = self.full_pass(record).trace
        if tap not in trace:
            raise InputError(f"this model has no tap {tap!r} (explorer/model/trace.py lists them)")
        return trace[tap]

    # ------------------------------------------------------------------ cache on vs off
    def compare_cache_modes(self) -> CacheComparison:
        """Rerun this generation with the cache on and with it off, and compare.

        Both runs start from the same input with the same settings and choose their own
        tokens (forcing only where the user forced one), so identical tokens are a check,
        not an assumption.
        """
        if self.needs_whole_passes:
            raise InputError("This branch's mean ablation needs every position in each pass: it has no cached run.")
        forced = {s.position: s.token_id for s in self.steps if s.forced}
        n_steps = len(self.steps)
        runs = {}
        for use_cache in (True, False):
            replay = self.started_again(use_cache=use_cache)
            logits = [replay.next_logits()]
            for _ in range(n_steps):
                if replay.finished:
                    break
                position = len(replay.token_ids)
                if position in forced:
                    replay.force(forced[position])
                else:
                    replay.step()
                logits.append(replay.next_logits())
            runs[use_cache] = (replay, logits)
        (on, logits_on), (off, logits_off) = runs[True], runs[False]
        diff = max(float((a - b).abs().max()) for a, b in zip(logits_on, logits_off, strict=False))
        return CacheComparison(
            positions=[t.position for t in on.timings],
            ms_cached=[t.elapsed_ms for t in on.timings],
            ms_uncached=[t.elapsed_ms for t in off.timings],
            tokens_cached=on.generated_ids,
            tokens_uncached=off.generated_ids,
            max_logit_difference=diff,
            cache_bytes=on.cache_bytes,
            token_ids=list(self.token_ids),
        )
