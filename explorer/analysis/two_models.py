"""The same text read by two models: a census of each one's heads, what each costs, and where
their next-token predictions agree along the text.

Per head (each model on its own tokens of the text; the scores of ``roles.py``):

* **previous token**: the mean weight a query puts on the key just before it (queries from 2 on);
* **first token** (the sink): the mean weight on key 0: the model's start token where its
  tokenizer adds one (Gemma 3's ``<bos>``), else the text's first token (SmolLM2 adds none);
* **induction**: on the model's own repeated random sequence (``roles.induction_attention``:
  ``INDUCTION_PERIOD`` random ids of its vocabulary, seed 0, twice), the mean weight a
  second-copy query puts on the token after its first occurrence;
* **entropy**: the mean entropy (nats) of a query's weights, queries from 2 on.

Costs: **KV-cache bytes per token** from the config: per layer ``kv_heads × head_dim × 2 (keys
and values) × bytes per number``, summed over the decoder layers; a sliding layer (Gemma 3's
local layers, Mistral) keeps only its window, so once the text is longer than the window it
adds nothing more: ``cache_bytes(T)`` counts it at ``min(T, window)`` positions.
**ms per cached step**: the median of a few greedy steps with the cache on, measured.

Agreement along the text. The two models cut the text into different tokens (SmolLM2's
vocabulary has 49k pieces, Gemma 3's 262k), so a full-vocabulary KL between them means
nothing. Positions are aligned by characters instead: a **boundary** of a model is a character
offset ``c`` where one of its tokens ends and the next begins (a character split over two tokens
is no boundary), plus ``c = 0`` where it reads a start token first. At each boundary the two
share (the text's end excluded), both models have read exactly ``text[:c]`` and both predict
what comes next. Each gives a probability to **the text's own next characters**
``text[c:c']``, up to the next shared boundary ``c'``: the product of the probabilities of its
own tokens spanning them (one token where both cut the text alike). With ``p`` and ``q`` those
two probabilities:

* ``divergence``: the symmetric KL (Jeffreys divergence, KL(P‖Q) + KL(Q‖P)) of the two
  yes/no distributions "the text goes on as written" / "it does not",
  ``(p − q) × (logit p − logit q)`` in nats: 0 where they are equally sure, large where one
  expects the text and the other does not;
* ``agree``: each model's most probable next token, decoded as the text it would add; the two
  agree when the shorter string is a non-empty prefix of the longer (``" Par"`` and
  ``" Paris"`` agree; ``" Paris"`` and ``" London"`` do not). A token that is only part of a
  character is written as its bytes (``"<c3>"``), as the token strip writes it.

A translator (encoder-decoder) takes part on its decoder side: its census and costs are those of
its decoder writing its own greedy translation of the text (its source); the agreement along the
text is left out (``agreement`` is None, ``agreement_note`` says why): its decoder never reads
the text itself.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

import numpy as np
import torch

from explorer.analysis import roles
from explorer.loading import LoadedModel
from explorer.model import ATTENTION
from explorer.session import GenerationSession, InputError
from explorer.tokens import continuation_texts

KINDS = ("previous token", "first token", "induction")
TIMED_STEPS = 5  # cached steps timed after one untimed warm-up step
TRANSLATION_STEPS = 24  # a translator's decoder writes at most this many tokens to be read
LOW_PROBABILITY = 1e-12  # keeps log and logit finite


@dataclass
class ModelCensus:
    """One model's heads and costs on the text."""

    name: str
    config: object  # ModelConfig
    tokens: list[str]  # the tokens the census read (a translator's: its translation)
    scores: dict[str, np.ndarray]  # kind -> (layers, heads)
    entropy: np.ndarray  # (layers, heads) nats
    step_ms: float  # median ms of a cached greedy step
    dtype_bytes: int  # bytes per number in the cache (the model's weights' dtype)

    @property
    def kv_bytes_per_token(self) -> int:
        """Keys and values of one position in every decoder layer (a sliding layer counted too)."""
        c = self.config
        return c.n_layers * c.n_kv_heads * c.head_dim * 2 * self.dtype_bytes

    def cache_bytes(self, positions: int) -> int:
        """The self-attention cache of ``positions`` tokens, a sliding layer at its window."""
        c = self.config
        per_layer_position = c.n_kv_heads * c.head_dim * 2 * self.dtype_bytes
        return sum(min(positions, c.window_of(i) or positions) for i in range(c.n_layers)) * per_layer_position

    def strongest(self, kind: str, n: int = 5) -> list[tuple[int, int, float]]:
        """The ``n`` heads with the highest ``kind`` score: (layer, head, score), strongest first."""
        values = self.scores[kind]
        order = np.argsort(-values, axis=None, kind="stable")[:n]
        return [(int(i // values.shape[1]), int(i % values.shape[1]), float(values.flat[i])) for i in order]

    def sliding_note(self) -> str:
        c = self.config
        windows = sorted({w for i in range(c.n_layers) if (w := c.window_of(i))})
        if not windows:
            return "every layer keeps every position"
        local = sum(1 for i in range(c.n_layers) if c.window_of(i))
        return (
            f"{local} of {c.n_layers} layers slide over {windows[0]:,} positions: past that length they add "
            "nothing more per token"
        )


@dataclass
class Agreement:
    """The two models' predictions at the character boundaries both tokenizations share."""

    boundaries: list[int]  # character offsets c, ascending
    segments: list[str]  # text[c:c'], the next characters up to the next shared boundary
    p_a: np.ndarray  # (positions,) model A's probability of each segment
    p_b: np.ndarray  # (positions,)
    top_a: list[str]  # each model's most probable next token, as the text it adds
    top_b: list[str]

    @property
    def divergence(self) -> np.ndarray:
        """(positions,) Jeffreys divergence (symmetric KL, nats) of the two yes/no distributions."""
        return jeffreys(self.p_a, self.p_b)

    @property
    def agree(self) -> list[bool]:
        return [top_agree(a, b) for a, b in zip(self.top_a, self.top_b, strict=True)]

    @property
    def agreement_rate(self) -> float:
        return float(np.mean(self.agree)) if self.boundaries else float("nan")


@dataclass
class TwoModels:
    text: str
    a: ModelCensus
    b: ModelCensus
    agreement: Agreement | None
    agreement_note: str = ""  # why there is no agreement (a translator)


def jeffreys(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL(P‖Q) + KL(Q‖P) for Bernoulli(p) and Bernoulli(q): (p − q)(logit p − logit q), nats."""
    p, q = (np.clip(np.asarray(x, dtype=np.float64), LOW_PROBABILITY, 1 - LOW_PROBABILITY) for x in (p, q))
    return (p - q) * (np.log(p / (1 - p)) - np.log(q / (1 - q)))


def top_agree(a: str, b: str) -> bool:
    """The shorter decoded string is a non-empty prefix of the longer."""
    short, long = sorted((a, b), key=len)
    return bool(short) and long.startswith(short)


@dataclass
class TextReading:
    """One decoder-only model's pass over the text: ids, where each token ends, what it predicts."""

    ids: list[int]
    ends: dict[int, int]  # boundary character offset -> index of the last token read there
    logprobs: torch.Tensor  # (T, vocab) log-probabilities of the next token after each position
    attention: list[np.ndarray]  # per layer (heads, T, T)


def token_boundaries(ids: list[int], offsets: list[tuple[int, int]], special: set[int]) -> dict[int, int]:
    """Character offset -> index of the token after which exactly ``text[:offset]`` has been read."""
    text_tokens = [i for i, t in enumerate(ids) if not (t in special and offsets[i] == (0, 0))]
    ends = {0: text_tokens[0] - 1} if text_tokens and text_tokens[0] > 0 else {}  # after a start token
    for k, i in enumerate(text_tokens):
        later = text_tokens[k + 1] if k + 1 < len(text_tokens) else None
        if later is None or offsets[i][1] <= offsets[later][0]:
            ends[offsets[i][1]] = i
    return ends


@torch.inference_mode()
def read_text(loaded: LoadedModel, text: str) -> TextReading:
    tokenizer = loaded.tokenizer
    if not getattr(tokenizer, "is_fast", False):
        raise InputError(f"{loaded.name}'s tokenizer gives no character offsets; choose a model with a fast tokenizer.")
    encoded = tokenizer(text, return_offsets_mapping=True)
    ids, offsets = encoded["input_ids"], [tuple(o) for o in encoded["offset_mapping"]]
    if len(ids) > loaded.config.max_positions:
        raise InputError(
            f"The text is {len(ids):,} tokens for {loaded.name}; it reads {loaded.config.max_positions:,}."
        )
    out = loaded.model(torch.tensor([ids]), record=ATTENTION)  # (1, T) in
    logprobs = torch.log_softmax(out.logits[0].float(), dim=-1)  # (T, vocab)
    attention = [out.trace.self_attention(i)[0].float().numpy() for i in range(loaded.config.n_layers)]
    ends = token_boundaries(ids, offsets, set(tokenizer.all_special_ids))
    return TextReading(ids, ends, logprobs, attention)


def census_of(loaded: LoadedModel, session: GenerationSession, attention: list[np.ndarray]) -> ModelCensus:
    """Scores from ``attention`` (per layer (heads, T, T), the text), induction from ``session``."""
    if attention[0].shape[-1] < roles.MIN_ROWS + 2:
        raise InputError(f"{loaded.name} reads the text as {attention[0].shape[-1]} tokens; type a longer text.")
    repeated, start = roles.induction_attention(session)
    scores = {
        "previous token": np.stack([roles.previous_token_score(a) for a in attention]),
        "first token": np.stack([roles.first_token_score(a) for a in attention]),
        "induction": np.stack([roles.induction_score(a, start, roles.INDUCTION_PERIOD) for a in repeated]),
    }
    entropy = np.stack([roles.row_entropy(a[:, 2:]) for a in attention])
    dtype_bytes = next(loaded.model.parameters()).element_size()
    return ModelCensus(
        loaded.name, loaded.config, session.token_texts(), scores, entropy, cached_step_ms(loaded, session.text),
        dtype_bytes,
    )  # fmt: skip


def cached_step_ms(loaded: LoadedModel, text: str) -> float:
    """Median ms of ``TIMED_STEPS`` greedy steps with the cache on (after one untimed)."""
    session = GenerationSession(loaded, text, use_cache=True, record_attention=False)
    times = []
    for _ in range(TIMED_STEPS + 1):
        if session.finished:
            break
        times.append(session.step().elapsed_ms)
    return statistics.median(times[1:] or times) if times else float("nan")


def census_alone(loaded: LoadedModel, text: str) -> tuple[ModelCensus, TextReading | None]:
    """One model's census; a decoder's reading of the text too (None for a translator)."""
    session = GenerationSession(loaded, text, record_attention=loaded.is_encoder_decoder)
    if loaded.is_encoder_decoder:  # its decoder reads what it writes: its own translation
        for _ in range(TRANSLATION_STEPS):
            if session.finished:
                break
            session.step()
        attention = [session.self_attention(i) for i in range(loaded.config.n_layers)]
        return census_of(loaded, session, attention), None
    reading = read_text(loaded, text)
    if reading.ids != session.token_ids:  # the session and the census must read the same tokens
        raise InputError(f"{loaded.name} tokenizes the text differently with offsets; report this as a bug.")
    return census_of(loaded, session, reading.attention), reading


def agreement_of(text: str, a: TextReading, b: TextReading, tokenizers: tuple) -> Agreement:
    shared = sorted(set(a.ends) & set(b.ends))
    positions = [c for c in shared if c < len(text)]
    follows = dict(itertools.pairwise(shared))
    p_a, p_b, top_a, top_b = [], [], [], []
    for c in positions:
        for reading, tokenizer, probs, tops in ((a, tokenizers[0], p_a, top_a), (b, tokenizers[1], p_b, top_b)):
            first, last = reading.ends[c], reading.ends[follows[c]]  # the tokens after c spanning text[c:c']
            targets = torch.tensor(reading.ids[first + 1 : last + 1])
            probs.append(float(reading.logprobs[first:last].gather(1, targets[:, None]).sum().exp()))
            best = int(reading.logprobs[first].argmax())
            tops.append(continuation_texts(tokenizer, reading.ids[: first + 1], [best])[0])
    segments = [text[c : follows[c]] for c in positions]
    return Agreement(positions, segments, np.array(p_a), np.array(p_b), top_a, top_b)


def compare_models(loaded_a: LoadedModel, loaded_b: LoadedModel, text: str) -> TwoModels:
    """Read ``text`` with two loaded models: each one's head census and costs, and where their
    next-token predictions agree along the text (see this module's docstring for every figure)."""
    census_a, reading_a = census_alone(loaded_a, text)
    census_b, reading_b = census_alone(loaded_b, text)
    if reading_a is None or reading_b is None:
        translator = loaded_a.name if reading_a is None else loaded_b.name
        note = (
            f"{translator} is a translator: its decoder writes a translation of the text and never reads the "
            "text itself, so there is no position where both models predict the same text."
        )
        return TwoModels(text, census_a, census_b, None, note)
    agreement = agreement_of(text, reading_a, reading_b, (loaded_a.tokenizer, loaded_b.tokenizer))
    return TwoModels(text, census_a, census_b, agreement)
