"""What the "Why this cell" view shows, without Gradio: the heatmap coloured by weight or by weight ×
what is carried, the chosen cell (a key, or the row's winner), its bars and its sentence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.analysis.circuits import WhyAttends, carried_norms, why_attends
from explorer.viz import attention_heatmap
from explorer.viz.circuits import why_figure
from explorer.viz.heatmap import with_outlined_cell

COLOURS = {
    "weight": "attention weight",
    "carried": "weight × what is carried, ‖α v W_O‖ (each row scaled to its largest)",
}
VALUE_NAMES = {"weight": "weight", "carried": "‖αvW_O‖"}  # a cell's number (the title says rows are scaled)
SHOWN = 8  # components on each side


@dataclass(frozen=True)
class CellChoice:
    """The "Why this cell" tab's slice of the state: the heatmap's colouring, and the key typed for
    the query at ``query`` (another query, or None: the row's winner, the key the query reads most)."""

    colour: str = "weight"
    key: int | None = None
    query: int | None = None

    def key_for(self, query: int) -> int | None:
        return self.key if self.query == query else None


def chosen_head(head: str) -> int:
    """The head the view explains: the selected one; head 0 while the page shows the average."""
    return 0 if head == "mean" else int(head)


def heatmap_values(session, layer: int, head: int, colour: str) -> np.ndarray:
    """(T, T) the weights, or ‖α_ij v_j W_O‖ with each row divided by its largest."""
    if colour == "weight":
        return session.self_attention(layer)[head]
    carried = carried_norms(session, layer, head)
    return carried / np.maximum(carried.max(-1, keepdims=True), 1e-12)


def heatmap_figure(session, layer: int, head: int, query: int, colour: str, key: int | None = None) -> dict:
    """The head's heatmap, the query's row outlined, and the cell explained (``key``) as well."""
    tokens = session.token_texts()
    values = heatmap_values(session, layer, head, colour)
    window = session.config.window_of(layer)
    figure = attention_heatmap(
        values, tokens, tokens, causal=True, window=window, selected_query=query,
        title=f"Layer {layer}, head {head}: {COLOURS[colour]}", value_name=VALUE_NAMES[colour],
    )  # fmt: skip
    return figure if key is None else with_outlined_cell(figure, query, key)


def chosen_key(session, layer: int, head: int, query: int, key: int | None) -> int:
    """The key asked for, if this query can read it; else the row's winner."""
    window = session.config.window_of(layer)
    first = 0 if window is None else max(0, query - window + 1)
    if key is not None and first <= key <= query:
        return key
    return int(np.argmax(session.self_attention(layer, query, query + 1)[head, 0]))


def explained(session, layer: int, head: int, query: int, key: int | None) -> WhyAttends:
    """The cell's decomposition (self-attention: the page's; ``explorer.why_attends`` does cross-attention too)."""
    return why_attends(session, layer, head, query, chosen_key(session, layer, head, query, key))


def cell_figure(cell: WhyAttends) -> dict:
    query_top = WhyAttends.largest(cell.query_components, SHOWN)
    key_top = WhyAttends.largest(cell.key_components, SHOWN)
    rows = [cell.query_names.index(name) for name, _ in query_top]
    columns = [cell.key_names.index(name) for name, _ in key_top]
    # Two lines: on one, a phone's chart cut it at "the largest c".
    rest = ", the others summed (grey)" if len(cell.key_components) > SHOWN else ""
    title = f"Why query {cell.query} reads key {cell.key} (score {cell.score:+.2f}):"
    title += f"<br><sub>the largest components{rest}</sub>"
    rests = the_rest(cell.query_components, query_top), the_rest(cell.key_components, key_top)
    return why_figure(query_top, key_top, cell.pairs[np.ix_(rows, columns)], title, rests)


def the_rest(components: dict[str, float], shown: list[tuple[str, float]]) -> tuple[str, float] | None:
    """The components not shown, summed as one bar ("the other 52, summed": a bare "the other 52"
    read as one more component), so that a side's bars add up to the score; None when every
    component is shown."""
    names = {name for name, _ in shown}
    others = [value for name, value in components.items() if name not in names]
    return (f"the other {len(others)}, summed", float(sum(others))) if others else None
