"""What each view shows, computed from one user's session (no Gradio event logic here)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from explorer.analysis.ablation import AblationResult, SwitchedOff
from explorer.analysis.attribution import Explained
from explorer.analysis.cache_lab import PolicyRun
from explorer.analysis.cache_modes import CacheComparison
from explorer.analysis.compare import Comparison
from explorer.analysis.domain import domain_note
from explorer.analysis.patching import PatchingResult
from explorer.analysis.proof import ParallelCheck, Sandbox
from explorer.analysis.roles import HeadRoles
from explorer.analysis.snapshot import Snapshot
from explorer.analysis.two_models import TwoModels
from explorer.cache_policies import full_cache_bytes
from explorer.present import model_store
from explorer.present.circuits import CellChoice
from explorer.present.lesson_at import LessonAt
from explorer.present.session_life import Life
from explorer.present.tabs import DEFAULT_TAB
from explorer.present.workshop_seats import Following, Leading
from explorer.session import GenerationSession, InputError, TopToken
from explorer.tokens import visible
from explorer.viz import attention_heatmap, head_grid, layer_profile_heatmap, timing_chart
from explorer.viz.colours import DEFAULT_SCALE
from explorer.viz.heatmap import window_note
from explorer.viz.labels import TOKEN_COLORS
from explorer.viz.window import query_window, with_overview

MEAN = "mean"
BAR_WIDTH = 20
ROOM_WARNING = 64  # the status line says how much room is left from this many positions before the cap

# What a tab computes on request (the causal proof, the sandbox, head roles, a switch-off, a policy
# run, an explanation, a comparison of runs, the KV-cache lab's refusal note), kept by name while it
# covers the tokens on screen.
KeptResult = ParallelCheck | Sandbox | HeadRoles | AblationResult | PolicyRun | Explained | Comparison | str


class Kept(NamedTuple):
    token_ids: list[int]  # the tokens the result covered
    result: KeptResult


@dataclass
class ExplorerState:
    """Everything one browser tab has chosen; lives in a gr.State."""

    model_name: str
    session: GenerationSession | None = None
    layer: int = 0
    head: str = MEAN  # "mean" or a head index as text
    query: int | None = None  # the selected query position; None follows the newest token
    comparison: CacheComparison | None = None
    tab: str = DEFAULT_TAB  # the open tab: only its figures are built and sent
    stop_requested: bool = False  # set by Stop (without the lock), read by a running Generate
    generating: bool = False  # a Generate is running
    stopped_at: int | None = None  # the token count at which Stop ended a Generate
    placed_text: str | None = None  # the text the explorer last put in the box (not typed by the user)
    image_format: str = "png"  # what the figures' camera button downloads: "png" or "svg"
    colour_scale: str = DEFAULT_SCALE  # the attention weights' colours (explorer.viz.colours)
    switched_off: SwitchedOff = field(default_factory=SwitchedOff)  # heads and sublayers to switch off
    circuits: CellChoice = field(default_factory=CellChoice)  # "Why this cell": the colouring and the key
    patching: PatchingResult | None = None  # the last patching sweep (of its own two texts, not the session's)
    two_models: TwoModels | None = None  # the last census of two models (kept across a switch between them)
    lesson: LessonAt | None = None  # the lesson step on screen (the Lessons panel's slice)
    workshop: Leading | Following | None = None  # this tab's part in a workshop (its panel's slice), set by the server
    # The session this tab had with each model it switched away from: its text, settings and tokens
    # (not its cache: the tokens are read again on the way back). One per model, so a few at most.
    left: dict[str, Snapshot] = field(default_factory=dict, repr=False)
    # Results computed on request, each with the tokens it covered: shown only while those are the
    # tokens on screen.
    results: dict[str, Kept] = field(default_factory=dict, repr=False)
    # One event at a time per tab: a Step clicked during a Generate waits for the current step.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # Its place among the server's sessions: idle time, memory budget (explorer.present.session_keeper).
    life: Life = field(default_factory=Life, repr=False, compare=False)

    def start(self, model_name: str, session: GenerationSession) -> None:
        """Show a new session (new text, settings or model); keep the layer and head where the model has them."""
        config = session.config
        if model_name != self.model_name:  # another model's heads and layers
            self.switched_off, self.patching = SwitchedOff(), None
        self.model_name, self.session = model_name, session
        self.layer = min(self.layer, config.n_layers - 1)
        if self.head != MEAN and int(self.head) >= config.n_heads:
            self.head = MEAN
        self.query, self.comparison, self.stopped_at = None, None, None
        self.results.clear()
        self.life.put_aside, self.life.ended = None, False

    def release(self) -> None:
        """Drop the session's tensors (cache, queries and keys): its browser tab has closed, or the
        server's keeper let them go (explorer.present.session_keeper)."""
        self.session, self.comparison, self.two_models = None, None, None
        self.results.clear()

    def keep(self, name: str, result: KeptResult) -> None:
        self.results[name] = Kept(list(self.session.token_ids), result)

    def result(self, name: str) -> KeptResult | None:
        """A kept result, while it still covers the tokens on screen; else None."""
        token_ids, result = self.results.get(name, (None, None))
        return result if token_ids == self.session.token_ids else None

    def current_comparison(self) -> CacheComparison | None:
        """The last cache comparison, while it still covers the tokens on screen."""
        if self.comparison is not None and self.comparison.token_ids == self.session.token_ids:
            return self.comparison
        return None

    def query_position(self) -> int:
        n = len(self.session.token_ids)
        return n - 1 if self.query is None or self.query >= n else self.query


def checked_view(session: GenerationSession, layer, head) -> tuple[int, str]:
    """A layer and head choice from the page, checked against the model before anything changes."""
    c = session.config
    try:
        layer_index = int(layer)
    except (TypeError, ValueError, OverflowError) as error:
        raise InputError(f"the layer must be a whole number; choose 0 to {c.n_layers - 1}") from error
    session.attention.check_layer(layer_index)
    head_choice = str(head)
    if head_choice != MEAN and not (head_choice.isdigit() and int(head_choice) < c.n_heads):
        raise InputError(f"head {head_choice!r} does not exist; choose the average or a head from 0 to {c.n_heads - 1}")
    return layer_index, head_choice


def checked_query(session: GenerationSession, index) -> int:
    n = len(session.token_ids)
    if not isinstance(index, int) or not 0 <= index < n:
        raise InputError(f"token {index!r} does not exist; choose one from 0 to {n - 1}")
    return index


def pick_head(attention: np.ndarray, head: str) -> np.ndarray:
    """(heads, Q, K) -> (Q, K) for one head or the mean over heads."""
    return attention.mean(axis=0) if head == MEAN else attention[int(head)]


def evicted_cells(session, layer: int, head: str, first: int, last: int) -> np.ndarray | None:
    """(queries, keys) the keys a cache policy had evicted before each query ran, for one head (its
    key/value head's) or, for the average, those evicted for every head; None without eviction."""
    evicted = session.evicted(layer, first, last)  # (kv_heads, Tq, T) or None
    if evicted is None:
        return None
    if head == MEAN:
        return evicted.all(axis=0)
    return evicted[int(head) // (session.config.n_heads // session.config.n_kv_heads)]


def head_label(head: str) -> str:
    return "average of all heads" if head == MEAN else f"head {head}"


# ---------------------------------------------------------------- token strip
def token_strip(state: ExplorerState) -> list[tuple[str, str]]:
    session = state.session
    kinds = session.token_kinds()
    kinds[state.query_position()] = "query"
    return [(visible(text), kind) for text, kind in zip(session.token_texts(), kinds, strict=True)]


STRIP_COLORS = TOKEN_COLORS
# A translator's source is its input, as a decoder's prompt is: the prompt's blue (it was a pale
# orange, read as the query's).
SOURCE_COLOR = TOKEN_COLORS["prompt"]


def strip_colors(translator: bool) -> dict[str, str]:
    """The legend: a translator's target starts with a start token, a prompt is the model's input."""
    return {k: v for k, v in STRIP_COLORS.items() if k != ("prompt" if translator else "start")}


def source_strip(session: GenerationSession) -> list[tuple[str, str]]:
    return [(visible(t), "source") for t in session.source_texts()]


def source_note(session: GenerationSession) -> str | None:
    """A translator's warning when the source holds words it was never trained on."""
    if not session.is_encoder_decoder:
        return None
    return domain_note(session.loaded.known_words, session.text)


# ---------------------------------------------------------------- candidates
def candidates(session: GenerationSession) -> tuple[list[TopToken], int | None, bool]:
    """(candidates, index of the chosen one or None, whether choosing one replaces the last token)."""
    if session.steps:
        last = session.steps[-1]
        chosen = next((i for i, t in enumerate(last.top_k) if t.token_id == last.token_id), None)
        return last.top_k, chosen, True
    return session.top_candidates(), None, False


NEXT_CANDIDATES = "Next-token candidates"  # before the first step: what may come next
LAST_CANDIDATES = "Candidates the last token was chosen from (✓)"  # after one: click another to take it instead


def candidates_label(session: GenerationSession) -> str:
    """The table's title, as it is: after a step it lists the distribution the last token came from
    (a stranger read "Next-token candidates" as the next one's and the ✓ as a prediction)."""
    return LAST_CANDIDATES if session.steps else NEXT_CANDIDATES


def candidate_rows(session: GenerationSession) -> list[list[str]]:
    top, chosen, _ = candidates(session)
    rows = []
    for i, t in enumerate(top):
        bar = "█" * max(1, round(t.probability * BAR_WIDTH)) if t.probability >= 0.005 else "▏"
        mark = "✓" if i == chosen else ""
        rows.append([mark, visible(t.text), f"{t.probability:6.1%}", bar])
    if chosen is None and session.steps:
        last = session.steps[-1]
        rows.append(["✓", visible(last.token_text), "forced", ""])
    return rows


# ---------------------------------------------------------------- attention figures
def self_attention_figure(state: ExplorerState):
    """The heatmap; past WINDOW_FROM tokens a window of rows around the selected token, and an overview."""
    session = state.session
    weights = pick_head(session.self_attention(state.layer), state.head)  # (T, T)
    tokens = session.token_texts()
    query = state.query_position()
    first, last = query_window(len(tokens), query)
    what = "Decoder self-attention" if session.is_encoder_decoder else "Causal self-attention"
    rows = f", queries {first}-{last - 1} of {len(tokens)}" if (first, last) != (0, len(tokens)) else ""
    window = session.config.window_of(state.layer)
    evicted = evicted_cells(session, state.layer, state.head, first, last)
    policy = f", cache: {session.cache_policy.label()}" if session.cache_plan.under_policy else ""
    figure = attention_heatmap(
        weights[first:last], tokens[first:last], tokens, causal=True, query_offset=first, window=window,
        title=f"{what}, layer {state.layer}, {head_label(state.head)}{rows}{window_note(window, len(tokens))}{policy}",
        selected_query=query - first, evicted=evicted, evicted_by=session.cache_policy.label(),
    )  # fmt: skip
    return with_overview(figure, weights, first, last, causal=True, window=window) if rows else figure


def cross_attention_figure(state: ExplorerState):
    session = state.session
    attention = session.cross_attention(state.layer)  # (heads, T, S)
    return attention_heatmap(
        pick_head(attention, state.head), session.token_texts(), session.source_texts(), causal=False,
        title=f"Cross-attention, layer {state.layer}, {head_label(state.head)}",
        selected_query=state.query_position(), key_title="source tokens (encoder output)",
        query_title="target tokens (decoder)",
    )  # fmt: skip


def encoder_attention_figure(state: ExplorerState):
    session = state.session
    layer = min(state.layer, session.config.n_encoder_layers - 1)
    attention = session.encoder_attention(layer)  # (heads, S, S)
    tokens = session.source_texts()
    return attention_heatmap(
        pick_head(attention, state.head), tokens, tokens, causal=False,
        title=f"Encoder self-attention, layer {layer}, {head_label(state.head)}",
    )  # fmt: skip


def heads_grid_image(state: ExplorerState):
    """Every head of the layer in one palette image, the keys a cache policy evicted hatched."""
    attention = state.session.self_attention(state.layer)
    switched_off = state.switched_off.heads_of(state.layer)
    session = state.session
    window = session.config.window_of(state.layer)
    evicted = session.evicted(state.layer)  # (kv_heads, T, T) or None
    if evicted is not None:  # each head its key/value head's
        evicted = evicted.repeat(session.config.n_heads // session.config.n_kv_heads, axis=0)
    return head_grid(attention, causal=True, switched_off=switched_off, scale=state.colour_scale, window=window,
                     evicted=evicted)  # fmt: skip


def every_layer_figure(state: ExplorerState):
    session = state.session
    position = state.query_position()
    weights = session.query_attention(position).mean(axis=1)  # (layers, keys)
    text = visible(session.token_texts()[position])
    return layer_profile_heatmap(
        weights, session.token_texts()[: position + 1], layer_names=layer_names(session.config),
        title=f"What {position} {text!r} reads in every layer (average of heads)",
    )  # fmt: skip


def layer_names(config) -> list[str]:
    """ "layer i", marked local (its window) or global where the model has sliding layers."""
    windows = [config.window_of(i) for i in range(config.n_layers)]
    if all(w is None for w in windows):
        return [f"layer {i}" for i in range(config.n_layers)]
    return [f"layer {i} ({'global' if w is None else f'local, {w}'})" for i, w in enumerate(windows)]


# ---------------------------------------------------------------- cache and timing
def timing_figure(state: ExplorerState):
    session = state.session
    comparison = state.current_comparison()
    if comparison is not None:
        series = {
            "cache on (rerun)": (comparison.positions, comparison.ms_cached),
            "cache off (rerun)": (comparison.positions, comparison.ms_uncached),
        }
    else:
        # One line per mode, broken (None) where the steps were taken in the other mode: a line
        # drawn straight across them would show timings that were never measured.
        positions = [t.position for t in session.timings]
        series = {
            name: (positions, [t.elapsed_ms if t.use_cache is use_cache else None for t in session.timings])
            for use_cache, name in ((True, "cache on"), (False, "cache off"))
            if any(t.use_cache is use_cache for t in session.timings)
        }
    return timing_chart(series)


def sliding_note(c, n: int) -> str:
    """What a cache that lets a sliding layer's passed positions go would hold ('' without sliding layers)."""
    windows = [w for w in c.windows() if w is not None]
    if not windows or n <= min(windows):
        return ""
    return (
        f" Its {len(windows)} sliding layers read only their last {max(windows)} positions: a sliding cache "
        f"(the lab's measure) holds {full_cache_bytes(c, n, 4) / 1e6:.2f} MB."
    )


def cache_summary(state: ExplorerState) -> str:
    session = state.session
    c = session.config
    n = len(session.token_ids)
    if session.cache is None:
        line = "**KV cache: off.** Every step recomputes all keys and values."
    elif session.cache_plan.under_policy:
        full = full_cache_bytes(c, n, 4)  # a sliding layer: the min(window, n) positions it reads
        held = session.cache.self_attn_bytes
        line = (
            f"**KV cache: {session.cache_policy.label()}, {held / 1e6:.2f} MB held** of the full cache's "
            f"{full / 1e6:.2f} MB ({1 - held / full:.0%} saved). Hatched cells in the heatmaps: keys the cache had "
            "evicted before that query ran."
        )
    else:
        held = session.cache.self_attn_bytes
        # The bytes a token written out: a lesson asks for them (lesson 10), and 0.29 MB over 8
        # positions is arithmetic a learner should not have to do to read the cache's cost.
        line = (
            f"**KV cache: on, {held / 1e6:.2f} MB** = 2 × {c.n_layers} layers × {c.n_kv_heads} key/value heads × "
            f"{c.head_dim} dims × {n} positions × 4 bytes: **{held // n:,} bytes a token**"
        )
        if session.cache.cross_attn_bytes:
            line += f", plus {session.cache.cross_attn_bytes / 1e6:.2f} MB of cross-attention keys and values"
        line += "." + sliding_note(c, n)
    comparison = state.current_comparison()
    if comparison is not None:
        steps = len(comparison.tokens_cached)
        if comparison.tokens_identical:
            line += (
                f"\n\n✓ **Checked:** with the cache on and off the model chose the same {steps} tokens; "
                f"the largest logit difference was {comparison.max_logit_difference:.1e}. " + costs(comparison)
            )
        else:
            first = next(
                i for i, (a, b) in enumerate(zip(comparison.tokens_cached, comparison.tokens_uncached, strict=False))
                if a != b
            )  # fmt: skip
            line += f"\n\n✗ **The runs differ** from generated token {first} on (logit difference up to "
            line += f"{comparison.max_logit_difference:.1e})."
    return line


def costs(comparison: CacheComparison) -> str:
    """What the cache bought in that rerun: each run's median step and the bytes the cache held
    (a stranger looked for the MB the docs promised, and saw only noisy single steps)."""
    on, off = np.median(comparison.ms_cached), np.median(comparison.ms_uncached)
    return (
        f"A step took {on:.0f} ms with the cache ({comparison.cache_bytes / 1e6:.2f} MB of keys and values "
        f"held) and {off:.0f} ms without it ({off / on:.1f}x), medians of the two runs."
    )


def _counted(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _counts(session, n_new: int) -> list[str]:
    """How many tokens: a translator's source (read by the encoder) and its translation so far,
    a decoder's text and how many of them it generated."""
    if session.is_encoder_decoder:
        return [_counted(len(session.source_ids), "source token"), f"{_counted(n_new, 'token')} translated"]
    return [f"{_counted(len(session.token_ids), 'token')} ({n_new} generated)"]


def status_line(state: ExplorerState) -> str:
    session = state.session
    n_new = len(session.generated_ids)
    name = model_store.public_name(state.model_name)  # a local folder never shows the server's path
    parts = [f"**{name}**", *_counts(session, n_new)]
    if session.steps:
        last = session.steps[-1]
        parts.append(f"last step {last.elapsed_ms:.0f} ms with the cache {'on' if last.use_cache else 'off'}")
    if session.cache_plan.under_policy:
        parts.append(f"cache: {session.cache_policy.label()}")
    elif not session.is_encoder_decoder:
        parts.append(f"prompt read in {session.prefill_ms:.0f} ms")
    if session.finished:
        parts.append("the model ended the text")
    elif state.stopped_at == len(session.token_ids):
        parts.append("Stop ended Generate here")
    left = session.max_positions - len(session.token_ids)
    if left <= ROOM_WARNING and not session.finished:
        parts.append(f"room for {left} more of the {session.max_positions:,} positions a session holds" if left
                     else f"the session is full ({session.max_positions:,} positions): Undo or Reset")  # fmt: skip
    line = " · ".join(parts)
    notice = state.life.notice  # the session was put aside and read again for this event
    return f"{notice}\n\n{line}" if notice else line
