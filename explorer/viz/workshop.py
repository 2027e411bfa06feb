"""The class's answers to a workshop question, for the teacher's page: one bar per answer (the share
of the class that chose it); for "what token comes next?" the model's probability of each candidate
beside it once revealed. The right answer is marked, and the model's probabilities drawn, only once it
is revealed: the teacher's page is projected while the class predicts.

The figure reads a tally (``explorer.workshop.Tally`` has this shape) and imports nothing of the
workshop: ``viz`` is the layer below it."""

from __future__ import annotations

from typing import Protocol

from .figure_json import Figure
from .labels import as_plotly_text

CLASS_COLOR, RIGHT_COLOR, MODEL_COLOR = "#6baed6", "#238b45", "#bdbdbd"


class Tally(Protocol):
    """The class's answers to one question, as the figure reads them."""

    counts: dict[str, int]  # each option (and each other typed guess) -> students, in the order shown
    answer: str  # the right answer (drawn only once revealed)
    answered: int
    students: int
    revealed: bool
    probabilities: dict[str, float]  # the model's, for "what token comes next?" (else empty)

    def is_answer(self, option: str) -> bool: ...


def tally_figure(tally: Tally) -> Figure:
    """Horizontal bars, the options top to bottom in the order students saw them."""
    answers = list(tally.counts)  # the options, then any typed guesses: text a browser sent
    labels = [as_plotly_text(o) for o in answers]
    total = max(1, tally.answered)
    shares = [tally.counts[o] / total for o in answers]
    colours = [
        RIGHT_COLOR if tally.revealed and tally.is_answer(o) else CLASS_COLOR for o in answers
    ]  # fmt: skip
    words = [f"{tally.counts[o]} of {tally.answered} students" for o in answers]
    traces = [
        {"type": "bar", "orientation": "h", "name": "the class", "y": labels, "x": shares,
         "marker": {"color": colours}, "customdata": words, "text": [f"{tally.counts[o]}" for o in answers],
         "textposition": "auto", "hovertemplate": "%{y}: %{customdata} (%{x:.0%})<extra></extra>"},
    ]  # fmt: skip
    with_model = bool(tally.probabilities) and tally.revealed  # the bars would show the answer
    if with_model:
        traces.append(
            {"type": "bar", "orientation": "h", "name": "the model's probability", "y": labels,
             "x": [tally.probabilities.get(o, 0.0) for o in answers], "marker": {"color": MODEL_COLOR},
             "hovertemplate": "%{y}: the model gives %{x:.1%}<extra></extra>"}
        )  # fmt: skip
    state = revealed_state(tally) if tally.revealed else "not revealed yet"
    if tally.probabilities and not tally.revealed:  # a line of its own: on one, the panel's width cut it
        state += "<br><sub>the model's probabilities come with the reveal</sub>"
    layout = {
        "title": {"text": f"{tally.answered} of {tally.students} answered · {state}", "x": 0.01, "font": {"size": 13}},
        "barmode": "group", "xaxis": {"range": [0, 1], "tickformat": ".0%", "title": {"text": "share"}},
        "yaxis": {"autorange": "reversed", "automargin": True, "type": "category"},
        "height": 120 + 34 * len(labels) * (2 if with_model else 1),
        "margin": {"l": 10, "r": 10, "t": 56 if "<br>" in state else 40, "b": 40},
        "legend": {"orientation": "h", "y": -0.25},
    }  # fmt: skip
    return {"data": traces, "layout": layout}


def revealed_state(tally: Tally) -> str:
    """The chart's title once revealed: the answer by name, green where students chose it. (A
    right answer nobody chose has a bar of length 0: "green is right" showed no green at all.)"""
    chosen = sum(n for option, n in tally.counts.items() if tally.is_answer(option))
    answer = as_plotly_text(tally.answer)
    return f"the answer: {answer} (green)" if chosen else f"the answer: {answer}, chosen by no one"
