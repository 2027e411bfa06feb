"""The views' tabs, listed once: id, title, order, and which models show them.

Everything else derives from this list: the page builds a ``gr.Tab`` for each entry and lets the
entry's module lay it out (``explorer.ui.tabs.code``); the step's outputs are the modules' figures;
a saved session, a link or a lesson names its open tab by ``id``; the tests read the list. A tab's
module (``explorer/ui/tabs/<module>.py``, in the page's package) holds its layout, its explanation,
how its figures are drawn from a session, and its own events:

    layout(page)        its components, inside the gr.Tab this list opens (page.add(name=...))
    FIGURES             the names ``figures`` returns (a change of view redraws them)
    figures(st)         its figures for the tab's ExplorerState, keyed by those names
    wire(wiring)        its own events (optional)
    STEPPED             False when a step cannot change its figures (optional; True by default)
    MODEL_VIEWS, model_views(loaded)   what a new model changes in it (optional)

This module is plain data (no Gradio, nothing of the page), so that a link's tab, a lesson's or a
saved session's can be checked without the page. A new tab is one new module and one line below.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tab:
    id: str  # in links, saved sessions and lessons; the gr.Tab's id
    title: str  # what the page shows
    module: str  # explorer/ui/tabs/<module>.py
    translator_only: bool = False  # shown for encoder-decoder models only

    @property
    def component(self) -> str:
        """The gr.Tab's name on the page."""
        return f"{self.id}_tab"


TABS = (
    Tab("self", "Self-attention", "self_attention"),
    Tab("cross", "Cross-attention", "cross_attention", translator_only=True),
    Tab("layers", "Every layer", "every_layer"),
    Tab("cache", "KV cache", "kv_cache"),
    Tab("lens", "Logit lens", "logit_lens"),
    Tab("roles", "Head roles", "head_roles"),
    Tab("ablation", "Switch heads off", "switch_off"),
    Tab("patching", "Patching", "patching"),
    Tab("attribution", "Why this token", "attribution"),
    Tab("circuits", "Why this cell", "circuits"),
    Tab("compare", "Compare runs", "compare_runs"),
    Tab("two_models", "Two models", "two_models"),
    Tab("proof", "Causal proof", "causal_proof"),
    Tab("architecture", "Architecture and cost", "architecture"),
)
TAB_IDS = tuple(tab.id for tab in TABS)
DEFAULT_TAB = TABS[0].id


def tab_named(tab_id: str) -> Tab:
    return next(t for t in TABS if t.id == tab_id)


def tab_of_module(module: str) -> Tab:
    """The entry of the tab that ``explorer/ui/tabs/<module>.py`` lays out (``__name__`` works too)."""
    return next(t for t in TABS if t.module == module.rsplit(".", 1)[-1])


def shown_tab(tab_id: str, translator: bool) -> str:
    """``tab_id`` if the page shows that tab for this kind of model, else the first tab."""
    entry = next((t for t in TABS if t.id == tab_id), None)
    return tab_id if entry is not None and (translator or not entry.translator_only) else DEFAULT_TAB


def opening_tab(current: str, translator: bool) -> str:
    """The tab a newly loaded model opens on: a translator's own first (its cross-attention is
    what it is for); another model keeps the open tab where it can."""
    if translator:
        return next(t.id for t in TABS if t.translator_only)
    return shown_tab(current, translator)
