"""Token text for axes and hovers."""

from __future__ import annotations

import functools

from explorer.tokens import visible

MAX_TICK_CHARS = 12
# The token strip's colours by where a token came from (GenerationSession.token_kinds), and the query's.
# "forced" (a token the user chose) was #dadaeb, so near the prompt's pale blue that fresh eyes took one
# for the other (twice: the strip draws its colours at half strength, so #bcbddc was still faint): a
# purple of its own now (tests/test_views.py checks every pair of a legend apart).
TOKEN_COLORS = {"prompt": "#dbe9f6", "start": "#eeeeee", "generated": "#c7e9c0", "forced": "#9e9ac8",
                "query": "#fdae6b"}  # fmt: skip


# A heatmap labels every position on both axes, and a Step redraws it: the same tokens' labels
# again each time (~300 a Step at 100 tokens, a third of the heatmap's Python). A label depends on
# the token's text only, so each is made once (a vocabulary's worth at most).
@functools.lru_cache(maxsize=65536)
def short(text: str) -> str:
    shown = visible(text)
    return as_plotly_text(shown if len(shown) <= MAX_TICK_CHARS else shown[: MAX_TICK_CHARS - 1] + "…")


def as_plotly_text(text: str) -> str:
    """``text`` shown as it is in a Plotly label, which reads labels as a little HTML: "</s>"
    would vanish as a closing tag, and "<b>" typed by a student would make the label bold."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def position_labels(tokens: list[str], offset: int = 0) -> list[str]:
    """Unique axis labels "position token": a repeated token stays its own row or column."""
    return [f"{i + offset} {short(t)}" for i, t in enumerate(tokens)]
