"""KV cache: the milliseconds of every step, cache on or off, and the cache's size; Compare reruns
the generation both ways and checks that the tokens are the same. The lab below reruns the text
under a cache policy (evict, keep the sinks, quantize) beside the full cache, and draws the budget
curve of every policy on a shipped text."""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Callable

import gradio as gr

from explorer import cache_policies as cp
from explorer.analysis.cache_lab import run_policy
from explorer.analysis.cache_modes import compare_cache_modes
from explorer.errors import InputError
from explorer.loading.registry import ASSETS
from explorer.present import views
from explorer.present.views import ExplorerState
from explorer.ui import render
from explorer.ui.heavy import heavy_event
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot
from explorer.ui.tab import USER_ERRORS, require, tab_event
from explorer.ui.wiring import Wiring
from explorer.viz import cache_lab as lab_figures

KV_CACHE = """**Why the KV cache changes speed and not output.** A token's keys and values
depend only on it and the tokens before it (the mask sees to that), so they never change
once computed. With the cache on, a step computes them for the one new token and reuses the
rest: the work per step grows linearly with the length. With the cache off, every step
recomputes the whole sequence, so the time per step grows with the length too, and the total
quadratically. The memory cost is 2 (keys and values) × layers × key/value heads × head size ×
positions × 4 bytes. **Compare** reruns this generation both ways and checks the tokens."""

LAB = """**The lab: what if the cache kept less?** Long-context systems decide *which* keys and
values to keep and *how precisely*. Choose a policy and a budget (the most keys a query reads,
its own included), then **Run** it on this text: the text so far is read again under the policy
beside the full cache. The grid shows what each layer holds after the last token; the chart, how
far each step's next-token distribution moved (KL divergence) and where the top token changed,
which is where greedy text under the policy would first depart. A window alone soon loses the
first token, which many heads use as a resting place (an *attention sink*): keep a few first
tokens and the damage mostly goes away (StreamingLLM). H2O keeps the keys that received the most
attention; key norm keeps the smallest keys; SnapKV presses the prompt once, keeping the keys its
last queries read most; KIVI stores old keys and values as 8- or 4-bit integers. **Switch this
session to it** reads this session's tokens again under the policy, and your Steps from then on run
under it: the heatmaps dot the keys it had evicted before each query ran (hatched: a later token).
**Budget curve** scores every policy at three budgets on a shipped text. On a model with sliding-window
layers (Gemma 3), a sliding layer keeps its window: what the window has passed is never read, so
the budget applies within it, and the global layers follow the policy alone."""

POLICIES = [  # (what the menu shows, the value it sends)
    ("sinks + window", "sinks"),
    ("sinks + window, cache positions", "sinks_cache"),  # short enough for a phone's box
    ("window", "window"),
    ("H2O: heavy + recent", "heavy_hitters"),
    ("key norm", "key_norm"),
    ("SnapKV (prompt pressed once)", "snapkv"),
    ("int8 (KIVI)", "int8"),
    ("int4 (KIVI)", "int4"),
]
CURVE_TEXT = ASSETS / "texts" / "declaration-of-independence.txt"  # public domain (assets/texts/README.md)
CURVE_TOKENS, CURVE_BUDGETS = 160, (16, 32, 64)  # half a minute of SmolLM2 on 2 cores (Gemma 3: 4-8)
MAX_BUDGET = 1024  # the session's cap

FIGURES = ("timing_plot", "lab_summary", "lab_grid", "lab_divergence", "lab_note")


def layout(page: Page) -> None:
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            page.add(
                timing_plot=gr.Plot(label="Milliseconds per step", elem_id="timing"),
                compare_button=gr.Button("Compare cache on and off", elem_id="compare"),
                cache_info=gr.Markdown(elem_id="cache-info"),
            )
        with gr.Column(scale=2, min_width=240):
            gr.Markdown(KV_CACHE, elem_classes="explain")
    gr.Markdown("### KV-cache lab", elem_id="lab-heading")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            # The policy on a row of its own: beside the numbers its box cut the names under its
            # arrow ("sinks + windo⌄" on a phone, "H2O: heavy + rec…" at 1280 px).
            page.add(lab_policy=gr.Dropdown(POLICIES, value="sinks", label="Policy", elem_id="lab-policy"))
            with gr.Row():
                page.add(
                    lab_budget=gr.Number(64, precision=0, label="Budget (keys a query reads)", elem_id="lab-budget"),
                    lab_sinks=gr.Number(4, precision=0, label="Sinks (first tokens kept)", elem_id="lab-sinks"),
                )
            with gr.Row():
                page.add(
                    lab_run=gr.Button("Run the policy on this text", variant="primary", elem_id="lab-run"),
                    lab_apply=gr.Button("Switch this session to it", elem_id="lab-apply"),
                    lab_full=gr.Button("Full cache again", elem_id="lab-full"),
                    lab_curve_button=gr.Button(
                        "Budget curve (½ minute on SmolLM2, longer on larger models)", elem_id="lab-curve-button"
                    ),
                )
            page.add(
                lab_note=gr.Markdown(elem_id="lab-note"),  # why the lab's last button did nothing (lab_noted)
                lab_info=gr.Markdown(elem_id="lab-info"),  # the budget curve's sentence
                # The last run's sentence, drawn with its figures: a Step makes the run stale and
                # takes all three away (in #lab-info it outlived them, a summary of a run not shown).
                lab_summary=gr.Markdown(elem_id="lab-summary"),
                lab_grid=gr.Plot(label="What each layer holds", elem_id="lab-grid"),
                lab_divergence=gr.Plot(label="Divergence from the full cache", elem_id="lab-divergence"),
                lab_curve=gr.Plot(label="Budget curve", elem_id="lab-curve"),
            )
        with gr.Column(scale=2, min_width=240):
            gr.Markdown(LAB, elem_classes="explain")


def figures(st: ExplorerState) -> Updates:
    run = st.result("cache_lab")  # while it covers the tokens on screen: a step makes it stale
    grid = divergence = None
    if run is not None:
        session = st.session
        grid = lab_figures.held_grid_figure(run, session.token_texts(), session.config.n_kv_heads)
        divergence = lab_figures.divergence_figure(run)
    return {
        "timing_plot": shown_plot(st, views.timing_figure(st), "timing"),
        "lab_grid": shown_plot(st, grid, "cache-lab-grid"),
        "lab_divergence": shown_plot(st, divergence, "cache-lab-divergence"),
        "lab_summary": "" if run is None else lab_summary(run),
        "lab_note": st.result(LAB_NOTE) or "",  # a refusal's reason, while the tokens are those it was refused at
    }


def wire(wiring: Wiring) -> None:
    page = wiring.page
    page.compare_button.click(wiring.on(on_compare), [page.state], page.pick("timing_plot", "cache_info"))
    chosen = [page.state, page.lab_policy, page.lab_budget, page.lab_sinks]
    run_outputs = page.pick("lab_grid", "lab_divergence", "lab_summary", "lab_note")
    page.lab_run.click(wiring.on(on_lab_run), chosen, run_outputs)
    page.lab_curve_button.click(
        wiring.on(on_budget_curve), [page.state], page.pick("lab_curve", "lab_info", "lab_note")
    )
    every_view = page.pick(*render.step_views(), *render.SESSION_VIEWS)  # a new session, the same model (the note too)
    page.lab_apply.click(wiring.on(on_lab_apply), chosen, every_view)
    page.lab_full.click(wiring.on(on_lab_full), [page.state], every_view)


def whole_number(value, what: str, least: int, most: int) -> int:
    """A number box's value (a float, or None when empty) as a whole number in range, or a message."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise InputError(f"{what} must be a whole number from {least} to {most:,}.")
    if not least <= int(value) <= most:
        raise InputError(f"{what} must be from {least} to {most:,} (got {int(value):,}).")
    return int(value)


def chosen_policy(name, budget, sinks, head_dim: int) -> cp.CachePolicy:
    """The policy the lab's controls describe, checked (everything here comes from the browser)."""
    if name in ("int8", "int4"):
        return cp.quantized(int(name[3:]), group=math.gcd(32, head_dim))
    if name not in {value for _, value in POLICIES}:
        raise InputError(f"Unknown policy {name!r}: choose one from the list.")
    size = whole_number(budget, "The budget", 2, MAX_BUDGET)
    if name == "window":
        return cp.window(size)
    if name == "key_norm":
        return cp.key_norm(size)
    if name == "heavy_hitters":
        return cp.heavy_hitters(size // 2, size - size // 2)
    if name == "snapkv":  # the last quarter of the budget's worth of prompt queries observe
        return cp.snapkv(size, observe=max(1, size // 4))
    n_sinks = whole_number(sinks, "The number of sinks", 1, size - 1)
    return cp.sinks(n_sinks, size - n_sinks, cache_positions=name == "sinks_cache")


LAB_NOTE = "cache_lab_note"  # the tab's kept result: the note of the lab's last refusal


def lab_noted(handler: Callable) -> Callable:
    """A lab button's event whose refusal (no Step yet, a budget out of range...) stays written
    beside the buttons, besides the pop-up, which fades: a learner who looked away still sees why
    nothing ran. It stays while the tokens are the ones it was refused at (a Step changes what the
    lab would run on, and "Step first" no longer holds after one); a run that goes ahead clears it."""

    @functools.wraps(handler)
    def wrapper(st, *args, **kwargs) -> Updates:
        try:
            out = handler(st, *args, **kwargs)
        except USER_ERRORS as error:
            gr.Warning(str(error))
            return {"lab_note": kept_note(st, f"⚠ **Not run.** {error}")}
        kept_note(st, "")
        skipped = not isinstance(out, dict) or out.get("__type__") == "update"  # gr.skip() is a dict too
        return {"lab_note": ""} if skipped else {**out, "lab_note": ""}

    return wrapper


def kept_note(st: ExplorerState | None, note: str) -> str:
    """``note``, kept with the tab's tokens (a Step's figures clear it: ``figures``)."""
    if isinstance(st, ExplorerState) and st.session is not None:
        st.keep(LAB_NOTE, note)
    return note


def lab_event(handler: Callable) -> Callable:
    """A tab event (``tab_event``: alone, a user's mistake said) whose refusal stays on the lab
    (``lab_noted``); its ``__wrapped__`` is the handler itself, as any tab event's is."""
    return functools.wraps(handler)(tab_event(lab_noted(handler)))


@lab_event
@heavy_event("A lab run")
def on_lab_run(st, name, budget, sinks, progress=gr.Progress()) -> Updates:
    st = require(st)
    policy = chosen_policy(name, budget, sinks, st.session.config.head_dim)
    progress(0, desc=f"Reading the text again under {policy.label()} and under the full cache")
    try:
        run = run_policy(st.session, policy)
    except cp.PolicyError as error:
        raise InputError(str(error)) from error
    st.keep("cache_lab", run)
    return {k: v for k, v in figures(st).items() if k != "timing_plot"}  # the grid, the divergence, the summary


@lab_event
@heavy_event("A text read under a cache policy")
def on_lab_apply(st, name, budget, sinks) -> Updates:
    """The session goes on under the policy: its tokens are read again, and the heatmaps hatch
    the keys the cache had evicted before each query ran."""
    st = require(st)
    policy = chosen_policy(name, budget, sinks, st.session.config.head_dim)
    if policy.bits is not None or policy.in_cache_positions:
        why = "a quantized key changes when its group is stored" if policy.bits else "a key turns to a new position"
        raise InputError(
            f"{policy.label()} is measured in the lab (Run): the heatmaps need the keys each query read, and "
            f"{why}. Step under a policy that keeps the original positions instead."
        )
    return restarted(st, policy)


@lab_event
def on_lab_full(st) -> Updates:
    st = require(st)
    return restarted(st, None) if st.session.cache_plan.under_policy else gr.skip()


def restarted(st: ExplorerState, policy) -> Updates:
    try:
        session = st.session.with_cache_policy(policy)
    except cp.PolicyError as error:
        raise InputError(str(error)) from error
    st.start(st.model_name, session)
    return render.render(st, full=True)


def lab_summary(run) -> str:
    first = run.first_departure
    where = "the top token never changes" if first is None else f"the top token first changes after position {first}"
    steps = len(run.positions)
    differ = sum(not same for same in run.same_top)
    return (
        f"**{run.policy.label()}** holds {run.bytes_held[-1] / 1e6:.2f} MB against the full cache's "
        f"{run.bytes_full[-1] / 1e6:.2f} MB ({run.saving:.0%} saved). Over {steps} steps, {where}; "
        f"{differ} of {steps} steps differ; largest KL {max(run.kl):.3g} nats."  # (0, not 0.00e+00)
    )


# The last model's curve, the same for every visitor: (a weak reference to the model, its rows,
# the tokens scored). Weak: the curve must not keep a model the server has let go in memory.
CURVE: list = [None, None, 0]
CURVE_LOCK = threading.Lock()  # one computation at a time; the visitors behind it get its result


def curve_of(loaded, progress) -> tuple[list, int]:
    """The budget curve of a model on the shipped text (its first CURVE_TOKENS tokens)."""
    with CURVE_LOCK:
        model, rows, n_tokens = CURVE
        if model is None or model() is not loaded:
            ids = loaded.tokenizer(CURVE_TEXT.read_text(), add_special_tokens=False)["input_ids"][:CURVE_TOKENS]
            rows = cp.budget_curve(loaded, ids, budgets=CURVE_BUDGETS, progress=progress)
            CURVE[:] = [weakref.ref(loaded), rows, len(ids)]
            n_tokens = len(ids)
        return rows, n_tokens


@lab_event
@heavy_event("The budget curve")
def on_budget_curve(st, progress=gr.Progress()) -> Updates:
    st = require(st)
    loaded = st.session.loaded
    if loaded.config.is_encoder_decoder:
        raise InputError("The budget curve scores a decoder-only model's perplexity: choose a decoder such as SmolLM2.")
    try:
        cp.window(16).check(loaded.config)  # T5 is refused by name (sliding layers keep their windows)
    except cp.PolicyError as error:
        raise InputError(str(error)) from error
    n_caches = len(cp.curve_policies(CURVE_BUDGETS, loaded.config.head_dim, rotary=cp.turns_keys(loaded.config)))
    progress(0, desc=f"Scoring {n_caches} caches on {CURVE_TOKENS} tokens")
    rows, n_tokens = curve_of(loaded, lambda done: progress(done, desc=f"Scoring {n_caches} caches"))
    figure = lab_figures.budget_curve_figure(list(rows), n_tokens, max(CURVE_BUDGETS) + 1)
    budget = max(CURVE_BUDGETS)
    sinks = next(r for r in rows if r.policy == "sinks" and r.budget == budget)
    window = next(r for r in rows if r.policy == "window" and r.budget == budget)
    full = rows[0].perplexity
    info = (
        f"On the first {n_tokens} tokens of the Declaration of Independence, budget {budget}: a window alone "
        f"{window.perplexity / full:.1f}x the full cache's perplexity, four sinks + a window "
        f"{sinks.perplexity / full:.2f}x."
    )
    return {"lab_curve": shown_plot(st, figure, "cache-lab-budget-curve"), "lab_info": info}


@tab_event
@heavy_event("Compare")
def on_compare(st, progress=gr.Progress()) -> Updates:
    st = require(st)
    progress(0, desc="Rerunning with the cache on and off")
    st.comparison = compare_cache_modes(st.session)
    return {"timing_plot": figures(st)["timing_plot"], "cache_info": views.cache_summary(st)}
