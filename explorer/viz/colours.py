"""The colour scales an attention weight can be drawn in, and what a masked cell looks like in each.

"blues" (white for 0, dark blue for 1) is the default: most weights are near 0, and white keeps
the few strong ones standing out. "viridis" and "cividis" are perceptually uniform (equal steps
of weight look like equal steps of colour) and stay readable with the common colour-vision
deficiencies (cividis was made for them); both go from dark (0) to light (1).

A masked cell (a future token) is never a colour of the scale: grey for "blues", white for the
others, and drawn hatched (``explorer/ui/static/heatmap.js``, ``explorer.viz.thumbnails``), so it can be
told from a weight of zero without relying on hue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scale:
    label: str
    stops: list  # [[at in 0..1, "#rrggbb"], ...] as Plotly takes a colorscale
    mask: str  # a masked cell's colour (under its hatching)


def _even(colours: str) -> list:
    """Stops evenly spaced, from colours written one after another: "#440154 #482878 ..."."""
    hexes = colours.split()
    return [[i / (len(hexes) - 1), colour] for i, colour in enumerate(hexes)]


SCALES = {
    "blues": Scale(
        "blue (white is 0)", [[0.0, "#ffffff"], [0.15, "#c6dbef"], [0.5, "#4292c6"], [1.0, "#08306b"]], "#bdbdbd"
    ),
    "viridis": Scale(
        "viridis",
        _even("#440154 #482878 #3e4989 #31688e #26828e #1f9e89 #35b779 #6ece58 #b5de2b #fde725"),
        "#ffffff",
    ),
    "cividis": Scale(
        "cividis (for colour-blind viewers)",
        _even("#00224e #123570 #3b496c #575d6d #707173 #8a8678 #a59c74 #c3b369 #e1cc55 #fee838"),
        "#ffffff",
    ),
}
DEFAULT_SCALE = "blues"
CHOICES = [(scale.label, name) for name, scale in SCALES.items()]


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))


def colour_table(name: str, levels: int = 256) -> np.ndarray:
    """(levels, 3) uint8: the scale's colour for weights 0, 1/(levels-1), ..., 1 (linear in RGB
    between stops, as Plotly and the page's heatmap interpolate)."""
    stops = SCALES[name].stops
    at = np.array([s[0] for s in stops])
    colours = np.array([rgb(s[1]) for s in stops], dtype=np.float64)  # (stops, 3)
    v = np.linspace(0.0, 1.0, levels)
    return np.stack([np.interp(v, at, colours[:, c]) for c in range(3)], axis=1).round().astype(np.uint8)


def recoloured(figure: dict, name: str) -> dict:
    """The figure with every attention-weight trace (drawn in the default scale) in scale ``name``,
    and its masked background in that scale's mask colour. Other traces (differences, patching,
    the lens) keep their own scales."""
    if name == DEFAULT_SCALE:
        return figure
    default, scale = SCALES[DEFAULT_SCALE], SCALES[name]
    data = [{**t, "colorscale": scale.stops} if t.get("colorscale") == default.stops else t for t in figure["data"]]
    layout = figure["layout"]
    if layout.get("plot_bgcolor") == default.mask:
        layout = {**layout, "plot_bgcolor": scale.mask}
    return {**figure, "data": data, "layout": layout}
