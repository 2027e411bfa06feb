"""Small images of every head's attention, for the all-heads grid."""

from __future__ import annotations

import functools
from collections.abc import Iterable

import numpy as np

from .colours import DEFAULT_SCALE, SCALES, colour_table, rgb

HATCH_RGB = (110, 110, 110)  # every HATCH_EVERY-th diagonal of a masked area
HATCH_EVERY = 5
GRID_COLUMNS = 5
CELL = 120  # thumbnail side, pixels
GAP = 8
LABEL = 18  # height of the "head h" line above each thumbnail
OFF_RGB = (203, 24, 29)  # switched-off heads


# The grid is a palette image: one byte a pixel, which PNG encodes ~6x faster than RGB (~1 ms
# against ~6 ms, a third of the bytes). Its 256 colours: the attention scale in LEVELS steps,
# then white, the mask, the hatching, red, and the grey shades of the labels' antialiased text.
LEVELS = 244
WHITE, MASK, HATCH, RED = LEVELS, LEVELS + 1, LEVELS + 2, LEVELS + 3
TEXT_SHADES = np.linspace(40, 255, 9)[:-1].round().astype(np.uint8)  # (8,) from the label colour to near white
TEXT = RED + 1  # the first of the text shades


@functools.lru_cache(maxsize=8)
def palette(scale: str = DEFAULT_SCALE) -> np.ndarray:
    """(256, 3) uint8: the grid's colours, by palette index."""
    specials = [(255, 255, 255), rgb(SCALES[scale].mask), HATCH_RGB, OFF_RGB]
    shades = np.repeat(TEXT_SHADES[:, None], 3, axis=1)
    return np.concatenate([colour_table(scale, LEVELS), np.array(specials, np.uint8), shades]).astype(np.uint8)


def head_levels(
    attention: np.ndarray, causal: bool, size: int = CELL, gamma: float = 0.5, window: int | None = None,
    evicted: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """(heads, queries, keys) -> (heads, size, size) uint8 palette indices, one thumbnail a head.

    A square gamma makes small weights visible; masked cells (the future, and what a sliding
    ``window`` leaves behind, and the keys a cache policy had evicted: ``evicted``, (heads,
    queries, keys)) are the mask colour, hatched, the evicted ones dotted instead (explorer.viz.colours:
    told from a zero weight without relying on hue, and an evicted key from a later one).
    """
    _, n_q, n_k = attention.shape  # (heads, queries, keys)
    # Nearest-neighbour resize to exactly size x size: sample the cells first, then colour only
    # those (size² per head, not Q x K: the same pixels, whatever the length).
    rows = (np.arange(size) * n_q // size)[:, None]  # (size, 1) query of each pixel row
    cols = (np.arange(size) * n_k // size)[None, :]  # (1, size) key of each pixel column
    masked = np.zeros((size, size), bool)  # (size, size)
    if causal:
        query = rows + (n_k - n_q)  # (size, 1): the position of each pixel row's query
        masked = cols > query
        if window is not None:
            masked |= cols <= query - window
    w = np.clip(attention[:, rows, cols], 0.0, 1.0) ** gamma  # (heads, size, size): every head at once
    levels = np.rint(w * (LEVELS - 1)).astype(np.uint8)
    masked = np.broadcast_to(masked, levels.shape)  # (heads, size, size)
    levels[masked] = MASK
    levels[masked & hatch_lines(size)] = HATCH
    if evicted is not None:  # dotted, not hatched: never mistaken for the model's own mask
        evicted_only = evicted[:, rows, cols] & ~masked
        levels[evicted_only] = MASK
        levels[evicted_only & hatch_dots(size)] = HATCH
    return levels


def head_thumbnails(
    attention: np.ndarray,
    causal: bool,
    size: int = CELL,
    gamma: float = 0.5,
    scale: str = DEFAULT_SCALE,
    window: int | None = None,
) -> list[np.ndarray]:
    """(heads, queries, keys) -> one (size, size, 3) uint8 RGB image per head: ``head_levels``
    in the scale's colours, the pixels the grid shows."""
    return list(palette(scale)[head_levels(attention, causal, size, gamma, window)])


@functools.lru_cache(maxsize=4)
def hatch_lines(size: int) -> np.ndarray:
    """(size, size) True on every HATCH_EVERY-th diagonal (bottom left to top right)."""
    pixel = np.arange(size)
    return (pixel[:, None] + pixel[None, :]) % HATCH_EVERY == 0


@functools.lru_cache(maxsize=4)
def hatch_dots(size: int) -> np.ndarray:
    """(size, size) True on a dot every HATCH_EVERY pixels each way (evicted keys)."""
    pixel = np.arange(size) % HATCH_EVERY < 2
    return pixel[:, None] & pixel[None, :]


def head_grid(
    attention: np.ndarray,
    causal: bool,
    columns: int = GRID_COLUMNS,
    switched_off: Iterable[int] = (),
    scale: str = DEFAULT_SCALE,
    window: int | None = None,
    evicted: np.ndarray | None = None,  # (heads, queries, keys): keys a cache policy had evicted
):
    """Every head's thumbnail in one palette image ("P"), labelled "head h", in rows of
    ``columns``; the heads in ``switched_off`` crossed out in red and labelled so.

    One image is one file to send and one element to draw (a gallery of nine cost the page
    about 90 ms a step). ``head_at`` maps a click on it back to a head.
    """
    from PIL import Image, ImageDraw

    levels = head_levels(attention, causal, window=window, evicted=evicted)  # (heads, CELL, CELL)
    grid = _labelled_grid(len(levels), columns).copy()  # (height, width) palette indices
    for h, thumb in enumerate(levels):
        x, y = (h % columns) * (CELL + GAP), (h // columns) * (CELL + GAP + LABEL)
        grid[y + LABEL : y + LABEL + CELL, x : x + CELL] = thumb
    image = Image.fromarray(grid, "P")
    image.putpalette(palette(scale).tobytes())
    draw = ImageDraw.Draw(image)
    for h in switched_off:
        x, y = (h % columns) * (CELL + GAP), (h // columns) * (CELL + GAP + LABEL)
        cross_out(draw, x, y + LABEL, CELL, colour=RED)
        draw.text((x + 52, y + 2), "switched off", fill=RED)
    return image


def cross_out(draw, x: int, y: int, side: int, colour=OFF_RGB) -> None:
    """A red frame and cross over the square at (x, y): a head that is switched off (``colour``:
    red as RGB, or its index in a palette image)."""
    width = 2 if side < 60 else 3
    draw.rectangle((x, y, x + side - 1, y + side - 1), outline=colour, width=width)
    draw.line((x, y, x + side - 1, y + side - 1), fill=colour, width=width)
    draw.line((x, y + side - 1, x + side - 1, y), fill=colour, width=width)


@functools.lru_cache(maxsize=8)
def _labelled_grid(n_heads: int, columns: int) -> np.ndarray:
    """(height, width) palette indices: the white grid with its "head h" labels, drawn once per
    head count (the text is the slow part), its antialiased greys as the nearest text shade."""
    from PIL import Image, ImageDraw

    n_rows = -(-n_heads // columns)
    grid = Image.new("L", (columns * (CELL + GAP), n_rows * (CELL + GAP + LABEL)), 255)
    draw = ImageDraw.Draw(grid)
    for h in range(n_heads):
        x, y = (h % columns) * (CELL + GAP), (h // columns) * (CELL + GAP + LABEL)
        draw.text((x + 2, y + 2), f"head {h}", fill=40)
    grey = np.asarray(grid)  # (height, width)
    shade = np.abs(grey[..., None].astype(int) - TEXT_SHADES).argmin(axis=-1)  # nearest text shade
    return np.where(grey == 255, WHITE, TEXT + shade).astype(np.uint8)


def head_at(x: float, y: float, n_heads: int, columns: int = GRID_COLUMNS) -> int | None:
    """The head whose cell holds pixel (x, y) of ``head_grid``'s image, or None between cells."""
    column, row = int(x // (CELL + GAP)), int(y // (CELL + GAP + LABEL))
    head = row * columns + column
    return head if column < columns and 0 <= head < n_heads else None
