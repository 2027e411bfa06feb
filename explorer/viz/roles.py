"""The head-roles overview: one small square per (layer, head), coloured by its role.

An image rather than a plotly figure so that a click can open a head, as in the all-heads
grid (``role_at`` maps a click back to a layer and head).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from .thumbnails import cross_out

# Okabe and Ito's palette, told apart with the common colour-vision deficiencies; each square
# also carries its role's letter, so no role depends on colour alone.
ROLE_COLORS = {
    "previous token": (213, 94, 0),  # vermillion
    "first token": (86, 180, 233),  # sky blue
    "self": (0, 158, 115),  # bluish green
    "induction": (204, 121, 167),  # reddish purple
    "alignment": (0, 114, 178),  # blue
    "": (224, 224, 224),
}
ROLE_LETTERS = {"previous token": "P", "first token": "F", "self": "S", "induction": "I", "alignment": "A", "": ""}
SQUARE = 26
GAP = 2
LEFT = 34  # room for "L12"
TOP = 16  # room for "h3"


def role_grid(
    tags: list[list[str]],
    strength: np.ndarray,
    selected: tuple[int, int] | None = None,
    switched_off: Collection[tuple[int, int]] = (),
):
    """tags[layer][head] and strength (layers, heads) in [0, 1] -> a PIL image, layer 0 on top;
    the selected head outlined, the switched-off heads crossed out in red."""
    from PIL import Image, ImageDraw

    layers, heads = strength.shape
    step = SQUARE + GAP
    image = Image.new("RGB", (LEFT + heads * step, TOP + layers * step), "white")
    draw = ImageDraw.Draw(image)
    for h in range(heads):
        draw.text((LEFT + h * step + 6, 2), f"h{h}", fill=(60, 60, 60))
    for i in range(layers):
        draw.text((2, TOP + i * step + 7), f"L{i}", fill=(60, 60, 60))
        for h in range(heads):
            tag = tags[i][h]
            color = np.array(ROLE_COLORS[tag], dtype=float)
            # Paler for weaker evidence: a score at the threshold is half way to white.
            weight = 0.35 + 0.65 * float(np.clip(strength[i, h], 0, 1)) if tag else 1.0
            fill = tuple(int(255 - (255 - c) * weight) for c in color)
            x, y = LEFT + h * step, TOP + i * step
            draw.rectangle((x, y, x + SQUARE - 1, y + SQUARE - 1), fill=fill)
            if (i, h) in switched_off:
                cross_out(draw, x, y, SQUARE)
            if ROLE_LETTERS[tag]:
                draw.text((x + 9, y + 7), ROLE_LETTERS[tag], fill=letter_colour(fill))
            if selected == (i, h):
                draw.rectangle((x - 1, y - 1, x + SQUARE, y + SQUARE), outline=(0, 0, 0), width=2)
    return image


def letter_colour(fill: tuple[int, int, int]) -> tuple[int, int, int]:
    """White on a dark square, near-black on a light one (by the square's luminance)."""
    luminance = 0.2126 * fill[0] + 0.7152 * fill[1] + 0.0722 * fill[2]
    return (255, 255, 255) if luminance < 140 else (20, 20, 20)


def role_at(x: float, y: float, layers: int, heads: int) -> tuple[int, int] | None:
    """(layer, head) of the square holding pixel (x, y) of ``role_grid``'s image, or None."""
    step = SQUARE + GAP
    if x < LEFT or y < TOP:
        return None
    head, layer = int((x - LEFT) // step), int((y - TOP) // step)
    return (layer, head) if layer < layers and head < heads else None
