"""Figure builders: axis order, labels, masked cells, the highlighted row."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.viz import attention_heatmap, head_thumbnails, layer_profile_heatmap, timing_chart
from explorer.viz.figure_json import decode_array, figure_json
from explorer.viz.heatmap import MASK_COLOR
from explorer.viz.thumbnails import HATCH_RGB

MASK_COLOR_RGB = (189, 189, 189)  # MASK_COLOR, as the thumbnails' pixels hold it

TOKENS = ["The", " cat", " sat", " the", " cat"]  # a repeated token must keep its own column


def causal_weights(n: int) -> np.ndarray:
    w = np.tril(np.random.default_rng(0).random((n, n)) + 0.1)
    return w / w.sum(1, keepdims=True)


def test_heatmap_axes_labels_and_mask():
    w = causal_weights(5)
    fig = attention_heatmap(w, TOKENS, TOKENS, causal=True, title="t", selected_query=2)
    (trace,) = fig["data"]
    assert trace["y"] == ["0 The", "1 ·cat", "2 ·sat", "3 ·the", "4 ·cat"]  # queries, top to bottom
    assert trace["x"] == trace["y"]  # keys left to right, the repeated " cat" stays two columns
    assert fig["layout"]["yaxis"]["autorange"] == "reversed"
    z = decode_array(trace["z"])
    future = np.triu(np.ones((5, 5), bool), k=1)
    assert np.isnan(z[future]).all() and not np.isnan(z[~future]).any()
    assert np.allclose(z[~future], w[~future], atol=1e-6)
    assert fig["layout"]["plot_bgcolor"] == MASK_COLOR  # masked cells show grey, a zero weight white
    (shape,) = fig["layout"]["shapes"]
    assert (shape["y0"], shape["y1"]) == (1.5, 2.5)  # the selected query's row


def test_a_sliding_window_masks_what_is_too_far_back_and_says_so():
    """Window 2: each query reads itself and the one before; the rest of its past is masked like
    the future, in the heatmap (NaN, with the window in the layout for the hover) and in the
    all-heads thumbnails (the mask's grey)."""
    from explorer.viz.heatmap import hidden_keys, window_note

    n = 5
    rows, cols = np.indices((n, n))
    expected = (cols > rows) | (cols <= rows - 2)
    assert (hidden_keys(n, n, window=2) == expected).all()
    assert (hidden_keys(2, n, query_offset=3, window=2) == expected[3:]).all()  # a window of rows
    fig = attention_heatmap(causal_weights(n), TOKENS, TOKENS, causal=True, title="t", window=2)
    assert (np.isnan(decode_array(fig["data"][0]["z"])) == expected).all()
    assert fig["layout"]["meta"] == {"window": 2}
    assert window_note(2, n) == ", sliding window of 2: hatched = later, or 2 or more back"
    assert window_note(8, n) == "" and window_note(None, n) == ""  # a window that hides nothing is not news
    (image,) = head_thumbnails(causal_weights(n)[None], causal=True, size=n, window=2)  # a pixel a cell
    mask_pixels = (image == MASK_COLOR_RGB).all(axis=-1) | (image == HATCH_RGB).all(axis=-1)
    assert (mask_pixels == expected).all()


def test_a_zero_weight_is_not_masked():
    w = np.array([[1.0, 0.0], [0.0, 1.0]])
    fig = attention_heatmap(w, ["a", "b"], ["x", "y"], causal=False, title="cross")
    z = decode_array(fig["data"][0]["z"])
    assert not np.isnan(z).any() and z[0, 1] == 0
    assert fig["layout"]["plot_bgcolor"] == "white"


def test_heatmap_refuses_mismatched_tokens():
    with pytest.raises(ValueError, match="does not fit"):
        attention_heatmap(np.ones((3, 3)), TOKENS, TOKENS, causal=True, title="t")


def test_thumbnails_show_the_mask_grey():
    w = causal_weights(4)[None].repeat(2, axis=0)
    images = head_thumbnails(w, causal=True, size=40)
    assert len(images) == 2 and images[0].shape == (40, 40, 3)
    assert tuple(images[0][0, -1]) == (189, 189, 189)  # top right: the future
    assert tuple(images[0][0, 0]) != (189, 189, 189)


def test_thumbnail_pixels_are_the_nearest_cells_colours_at_any_length():
    """Each pixel is the colour of the cell nearest to it (sampled, then coloured): a long
    sequence costs the same as a short one, and shows the same pixels as colouring every cell."""
    from explorer.viz.thumbnails import HATCH_RGB, LEVELS, hatch_lines, palette

    blues = palette("blues")  # the scale in LEVELS steps, then the grid's other colours
    rng = np.random.default_rng(0)
    for n_q, n_k in ((3, 3), (7, 7), (300, 300), (5, 9)):
        w = rng.random((2, n_q, n_k)).astype(np.float32)
        images = head_thumbnails(w, causal=True, size=40)
        for y, x in ((0, 0), (39, 39), (0, 39), (17, 3)):
            q, k = y * n_q // 40, x * n_k // 40
            if k > q + (n_k - n_q):
                expected = HATCH_RGB if hatch_lines(40)[y, x] else (189, 189, 189)
            else:
                expected = blues[round(float(np.clip(w[1, q, k], 0, 1)) ** 0.5 * (LEVELS - 1))]
            assert tuple(images[1][y, x]) == tuple(expected), (n_q, n_k, y, x)


def test_thumbnails_in_another_scale_hatch_the_mask_and_follow_the_scale():
    from explorer.viz.colours import SCALES, colour_table, rgb
    from explorer.viz.thumbnails import HATCH_RGB, hatch_lines

    w = causal_weights(40)[None]
    image = head_thumbnails(w, causal=True, size=40, scale="cividis")[0]
    future = np.triu(np.ones((40, 40), bool), k=1)
    lines = hatch_lines(40) & future
    assert lines.sum() > 50 and (image[lines] == HATCH_RGB).all()  # the mask is hatched...
    assert (image[future & ~lines] == rgb(SCALES["cividis"].mask)).all()  # ...over the scale's mask colour
    table = colour_table("cividis")
    assert tuple(image[0, 0]) == tuple(table[255])  # the first token reads only itself: weight 1
    assert tuple(table[0]) == rgb("#00224e") and tuple(table[255]) == rgb("#fee838")


def test_recoloured_swaps_only_the_attention_scale():
    from explorer.viz.colours import SCALES, recoloured

    figure = attention_heatmap(causal_weights(5), TOKENS, TOKENS, causal=True, title="t")
    other = {"data": [{"type": "heatmap", "colorscale": "RdBu"}], "layout": {"plot_bgcolor": "white"}}
    viridis = recoloured(figure, "viridis")
    assert viridis["data"][0]["colorscale"] == SCALES["viridis"].stops
    assert viridis["layout"]["plot_bgcolor"] == SCALES["viridis"].mask
    assert figure["data"][0]["colorscale"] == SCALES["blues"].stops  # the original is left as it was
    assert recoloured(other, "viridis") == other


def test_head_grid_and_clicks_on_it():
    from explorer.viz import head_at, head_grid
    from explorer.viz.thumbnails import CELL, GAP, LABEL

    w = causal_weights(6)[None].repeat(9, axis=0)
    w[4] = np.eye(6)  # head 4 reads only itself: a dark diagonal
    image = head_grid(w, causal=True)
    assert image.mode == "P"  # one byte a pixel: PNG encodes it ~6x faster than RGB
    grid = np.asarray(image.convert("RGB"))
    assert grid.shape == (2 * (CELL + GAP + LABEL), 5 * (CELL + GAP), 3)  # 9 heads in rows of 5
    x0, y0 = 4 * (CELL + GAP), LABEL  # head 4's thumbnail
    assert tuple(grid[y0 + CELL - 1, x0 + CELL - 1]) == (8, 48, 107)  # its last diagonal cell: weight 1
    assert tuple(grid[y0, x0 + CELL - 1]) == (189, 189, 189)  # its top right: masked
    assert head_at(x0 + 10, y0 + 10, 9) == 4
    assert head_at(10, CELL + GAP + LABEL + 30, 9) == 5  # second row
    assert head_at(4 * (CELL + GAP) + 10, CELL + GAP + LABEL + 30, 9) is None  # no tenth head
    assert head_at(5 * (CELL + GAP) + 1, 10, 9) is None  # right of the grid


def test_layer_profile_and_timing():
    fig = layer_profile_heatmap(np.full((3, 2), 0.5), ["a", "b"], title="p")
    assert fig["data"][0]["y"] == ["layer 0", "layer 1", "layer 2"]
    chart = timing_chart({"cache on": ([5, 6], [10.0, 11.0]), "cache off": ([5, 6], [20.0, 30.0])})
    assert [t["name"] for t in chart["data"]] == ["cache on", "cache off"]
    assert chart["data"][1]["y"] == [20.0, 30.0]


def test_special_tokens_survive_plotly_html():
    fig = attention_heatmap(np.eye(2), ["<pad>", "</s>"], ["a", "b"], causal=False, title="t")
    assert fig["data"][0]["y"] == ["0 &lt;pad&gt;", "1 &lt;/s&gt;"]


def test_figures_are_valid_plotly():
    """The dicts are what plotly.js reads: plotly's own validator accepts them, typed arrays and all."""
    import json

    import plotly.graph_objects as go

    w = causal_weights(4)
    for fig in (
        attention_heatmap(w, TOKENS[:4], TOKENS[:4], causal=True, title="t", selected_query=1),
        layer_profile_heatmap(w, TOKENS[:4], title="p"),
        timing_chart({"cache on": ([1, 2], [3.0, 4.0])}),
    ):
        validated = go.Figure(json.loads(figure_json(fig)))  # raises on an unknown or malformed property
        assert len(validated.data) == len(fig["data"])


def test_timing_chart_leaves_room_for_its_labels():
    """The y tick labels ("200") and the x title have margins of their own; the legend sits above
    the plot, clear of the x title; positions are whole numbers."""
    chart = timing_chart({"cache on": ([5, 6, 7, 8], [100.0, 150.0, 200.0, 250.0])})
    layout = chart["layout"]
    assert layout["margin"]["l"] >= 40 and layout["yaxis"]["automargin"] and layout["xaxis"]["automargin"]
    assert layout["legend"]["y"] >= 1 and layout["legend"]["yanchor"] == "bottom"
    assert layout["xaxis"]["dtick"] == 1
    long_run = timing_chart({"cache on": (list(range(5, 705)), [1.0] * 700)})
    assert long_run["layout"]["xaxis"]["dtick"] == 70


def test_characters_that_draw_nothing_are_named():
    from explorer.tokens import visible

    assert visible("\u200d") == "⟨ZWJ⟩"
    assert visible("🐱\u200d👤") == "🐱⟨ZWJ⟩👤"
    assert visible("\ufe0f") == "⟨VS16⟩"  # a variation selector alone: nothing to draw it on
    assert visible("❤\ufe0f") == "❤\ufe0f"  # on its character it draws the emoji: left alone
    assert visible("\u202e") == "⟨U+202E⟩"
    assert visible(" a\n") == "·a⏎" and visible("") == "∅"


def test_a_long_sequence_shows_a_window_of_rows_and_an_overview():
    from explorer.viz.window import WINDOW_ROWS, block_max, query_window, with_overview

    assert query_window(100, 99) == (0, 100)  # short: every row
    assert query_window(700, 699) == (700 - WINDOW_ROWS, 700)  # the newest rows
    assert query_window(700, 10) == (0, WINDOW_ROWS)
    assert query_window(700, 300) == (300 - WINDOW_ROWS // 2, 300 + WINDOW_ROWS // 2)  # around the selected row
    rng = np.random.default_rng(0)
    n = 300
    weights = np.tril(rng.random((n, n))).astype(np.float32)
    weights /= weights.sum(axis=1, keepdims=True)
    pooled, size = block_max(weights, causal=True, cells=128)
    assert size == 3 and pooled.shape == (100, 100)
    assert pooled[5, 2] == weights[15:18, 6:9].max()  # each cell the largest weight of its block
    assert np.isnan(pooled[0, 99]) and not np.isnan(pooled[99, 0])  # a block wholly in the future is masked
    tokens = [f"t{i}" for i in range(n)]
    first, last = 200, 296
    window = attention_heatmap(weights[first:last], tokens[first:last], tokens, causal=True, title="w",
                               query_offset=first)  # fmt: skip
    figure = with_overview(window, weights, first, last, causal=True)
    assert [t.get("name") for t in figure["data"]] == ["attention", "overview"]
    assert decode_array(figure["data"][0]["z"]).shape == (WINDOW_ROWS, n)
    outline = figure["layout"]["shapes"][-1]
    assert (outline["y0"], outline["y1"], outline["yref"]) == (first - 0.5, last - 0.5, "y2")
    import json

    import plotly.graph_objects as go

    go.Figure(json.loads(figure_json(figure)))  # valid plotly


def test_the_grid_labels_keep_their_shades_and_the_palette_its_colours():
    """The palette image shows what the RGB one did: the scale's ends, the mask, the labels' text."""
    from explorer.viz import head_grid
    from explorer.viz.colours import SCALES, colour_table, rgb
    from explorer.viz.thumbnails import CELL, LABEL, TEXT_SHADES, palette

    for scale in SCALES:
        colours = palette(scale)
        assert len(colours) == 256 and tuple(colours[0]) == tuple(colour_table(scale)[0])
        assert tuple(colours[243]) == tuple(colour_table(scale)[255]) and rgb(SCALES[scale].mask) in map(tuple, colours)
    grid = np.asarray(head_grid(causal_weights(6)[None].repeat(3, axis=0), causal=True).convert("RGB"))
    label = grid[:LABEL, :CELL]  # "head 0"
    greys = {tuple(p) for p in label.reshape(-1, 3)}
    assert (40, 40, 40) in greys and (255, 255, 255) in greys  # the text's colour and the paper
    assert greys <= {(int(v),) * 3 for v in TEXT_SHADES} | {(255, 255, 255)} and len(greys) > 3  # antialiased


def test_a_tokens_label_is_made_once_and_stays_its_own():
    """Labels are remembered by the token's text (a Step relabels every position): a repeated
    token gets the same label, each position stays its own, and what a label escapes stays escaped."""
    from explorer.viz.labels import position_labels, short

    short.cache_clear()
    tokens = [" the", "<b>", " the", "\n", "a very long token indeed"]
    first = position_labels(tokens)
    assert first == ["0 ·the", "1 &lt;b&gt;", "2 ·the", "3 ⏎", "4 a·very·long…"]
    assert position_labels(tokens) == first
    assert short.cache_info().hits >= len(tokens) + 1  # the second call and the repeated " the" were remembered
