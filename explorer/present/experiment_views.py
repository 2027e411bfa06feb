"""The views of the "Why this token" (attribution) and "Compare runs" tabs."""

from __future__ import annotations

import numpy as np

from explorer.analysis import attribution, compare
from explorer.analysis.attribution import Explained
from explorer.errors import InputError
from explorer.present.views import MEAN, ExplorerState, head_label
from explorer.tokens import visible
from explorer.viz.experiments import (
    aligned_tokens,
    alignment_heatmap,
    attribution_chart,
    colored_strip,
    comparison_chart,
    difference_heatmap,
    source_bars,
)

ROLLOUT = "attention-rollout"
METHOD_CHOICES = [(name, key) for key, name in attribution.METHODS.items()] + [
    ("Attention rollout (attention-based)", ROLLOUT)
]
N_ALTERNATIVES = 5


# ---------------------------------------------------------------- why this token
def target_choices(state: ExplorerState) -> list[tuple[str, str]]:
    """What can be explained at the selected token: the token itself (the logit it had at the
    position before, which chose it), the other candidates of that step, and, at the newest
    token, the candidates for the next one. Values are "position:token id"."""
    session = state.session
    q = state.query_position()
    choices = []
    if q >= 1:
        token = session.token_ids[q]
        how = "chosen" if q >= session.prompt_length else "given"
        choices.append((f"{visible(session.token_texts()[q])!r} ({how}, position {q})", f"{q - 1}:{token}"))
        step = next((s for s in session.steps if s.position == q), None)
        for top in (step.top_k if step else [])[:N_ALTERNATIVES]:
            if top.token_id != token:
                label = f"{visible(top.text)!r} instead (p {top.probability:.2f} at position {q})"
                choices.append((label, f"{q - 1}:{top.token_id}"))
    if q == len(session.token_ids) - 1 and not session.finished:
        for top in session.top_candidates(N_ALTERNATIVES):
            choices.append((f"next: {visible(top.text)!r} (p {top.probability:.2f})", f"{q}:{top.token_id}"))
    return choices


def parse_target(value: str | None, state: ExplorerState) -> tuple[int, int]:
    choices = dict((v, label) for label, v in target_choices(state))
    if not value or value not in choices:
        raise InputError("Choose what to explain: click a token in the strip, then pick it or a candidate.")
    position, token_id = value.split(":")
    return int(position), int(token_id)


def explain(state: ExplorerState, value: str | None, method: str, progress=None) -> Explained:
    session = state.session
    position, token_id = parse_target(value, state)
    if method not in attribution.METHODS and method != ROLLOUT:
        raise InputError(f"attribution method {method!r}? Choose one of the list.")
    result = None
    if method != ROLLOUT:
        result = attribution.attribute(session, position, token_id, method, progress=progress)
    translator = session.is_encoder_decoder
    rollout = None if translator else attribution.attention_rollout(session, position)
    cross_rows = attribution.cross_attention_rows(session, position) if translator else None
    return Explained(method, result, position, session.tokenizer.decode([token_id]), rollout, cross_rows)


def explained(state: ExplorerState) -> Explained | None:
    return state.result("attribution")


def attribution_summary(state: ExplorerState) -> str:
    shown = explained(state)
    if shown is None:
        return (
            "Click a token in the strip (or keep the newest), choose it or a candidate below, and press **Explain it**."
        )
    if shown.result is None:
        where = "cross-attention at that step, layer by layer" if shown.cross_rows is not None else "attention rollout"
        return (
            f"Shown for {visible(shown.token)!r} at position {shown.position}: {where} only (attention-based)."
            + rollout_note(shown)
        )
    text = shown.result.summary()
    if shown.result.method == "integrated-gradients" and shown.result.completeness_error > 0.01:
        text += " The path from the baseline is rough here: the scores are approximate."
    scores, names = _main_scores(shown), _main_tokens(state, shown)
    top = attribution.top_positions(np.abs(scores))
    text += " Strongest: " + ", ".join(f"{visible(names[i])!r} ({scores[i]:+.2f})" for i in top) + "."
    return text + rollout_note(shown)


def rollout_note(shown: Explained) -> str:
    """Rollout on a model with an attention sink piles up on the first token: say so."""
    if shown.rollout is None or shown.rollout[0] < 0.9:
        return ""
    return (
        f" Attention rollout puts {shown.rollout[0]:.0%} on the first token: most heads rest their attention there "
        "(the sink), so rollout says little about this token; the gradients look past it."
    )


def _main_scores(shown: Explained) -> np.ndarray:
    """What the strip is coloured by: the method's scores, the source's for a translator."""
    if shown.result is None:
        return shown.rollout if shown.rollout is not None else shown.cross_rows[-1]
    return shown.result.source_scores if shown.result.source_tokens else shown.result.scores


def _main_tokens(state: ExplorerState, shown: Explained) -> list[str]:
    session = state.session
    return session.source_texts() if session.is_encoder_decoder else session.token_texts()[: shown.position + 1]


def attribution_strip(state: ExplorerState) -> str:
    shown = explained(state)
    if shown is None:
        return ""
    what = "the last layer's cross-attention" if shown.result is None and shown.cross_rows is not None else None
    name = what or (attribution.METHODS[shown.method] if shown.result else "attention rollout")
    strips = [colored_strip(_main_tokens(state, shown), _main_scores(shown), label=f"tokens coloured by {name}")]
    if shown.result is not None and shown.result.source_tokens:  # the target so far, too
        strips.append(colored_strip(shown.result.tokens, shown.result.scores, label=f"target so far, by {name}"))
    legend = f"<p class='strip-legend'>Coloured by <b>{name}</b>: blue raises the token's score, orange lowers it.</p>"
    return legend + "".join(strips)


def attribution_figures(state: ExplorerState) -> tuple[dict | None, dict | None]:
    """The chart of scores (with rollout below it), and for a translator the alignment heatmap."""
    shown = explained(state)
    if shown is None:
        return None, None
    session, token = state.session, visible(shown.token)
    chart = None
    if shown.result is not None:
        method = attribution.METHODS[shown.method]
        if session.is_encoder_decoder:
            chart = source_bars(
                session.source_texts(), shown.result.source_scores, method,
                title=f"{method}: the source tokens behind {token!r} (position {shown.position})",
            )  # fmt: skip
        else:
            chart = attribution_chart(
                shown.result.tokens, shown.result.scores, method, shown.rollout,
                title=f"{method}: the tokens behind {token!r} (position {shown.position})",
            )  # fmt: skip
    elif shown.rollout is not None:
        chart = attribution_chart(
            session.token_texts()[: shown.position + 1], shown.rollout, "rollout share", None,
            title=f"Attention rollout (attention-based) at position {shown.position}",
        )  # fmt: skip
    alignment = None
    if shown.cross_rows is not None:
        top = None if shown.result is None else attribution.top_positions(shown.result.source_scores, 1)
        alignment = alignment_heatmap(
            shown.cross_rows, session.source_texts(), top=top,
            title=f"Where the step writing {token!r} read the source, per layer (attention-based; framed: "
            "the top attributed)",
        )  # fmt: skip
    return chart, alignment


# ---------------------------------------------------------------- compare runs
def runs_compared(state: ExplorerState) -> compare.Comparison | None:
    return state.result("compare")


def comparison_summary(state: ExplorerState) -> str:
    shown = runs_compared(state)
    if shown is None:
        return (
            "Choose run B and press **Compare**: it starts again from the same text with one thing changed and "
            f"generates as many tokens as run A (the session on screen, {len(state.session.generated_ids)} so far)."
        )
    return shown.summary()


def comparison_tokens(state: ExplorerState) -> str:
    shown = runs_compared(state)
    return "" if shown is None or not shown.steps else aligned_tokens(shown.tokens_a, shown.tokens_b, shown.same)


def comparison_figures(state: ExplorerState) -> tuple[dict | None, dict | None]:
    shown = runs_compared(state)
    if shown is None or not shown.steps:
        return None, None
    chart = comparison_chart(
        shown.steps, shown.p_a_of_b, shown.p_b_of_a, shown.kl,
        title="Each step: the probability each run gave the other's token, and how far apart their predictions are",
    )  # fmt: skip
    head = None if state.head == MEAN else int(state.head)
    difference_of = shown.attention_difference(state.layer, head)
    difference = difference_heatmap(
        difference_of, shown.a.token_texts(),
        title=f"Attention of run A minus run B, layer {state.layer}, {head_label(state.head)} (blue: A reads it more; "
        f"largest difference {np.abs(difference_of).max():.1e})",
    )  # fmt: skip
    return chart, difference
