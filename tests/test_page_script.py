"""The page's own scripts as code: what they read from the page, and their pure parts run in node
(tests/js/) against the Python they mirror."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from explorer.present import views
from explorer.ui import layout

ROOT = Path(__file__).resolve().parents[1]


def test_the_page_script_finds_the_query_token_without_knowing_its_colour():
    """The arrow keys and the strip's scrolling find the query token by the strip's own legend: no
    colour of the palette is written into the script, so changing one cannot break them silently."""
    script = layout.PAGE_SCRIPT.lower()
    for kind, colour in views.STRIP_COLORS.items():
        rgb = ", ".join(str(int(colour[i : i + 2], 16)) for i in (1, 3, 5))
        assert colour.lower() not in script and rgb not in script, f"page.js names the strip's {kind} colour"
    assert re.search(r"legend-item", script) and "=== 'query'" in script


def test_the_selected_token_is_marked_by_an_attribute_that_the_keys_and_the_strip_read():
    """One part (static/token_strip.js) marks the query token with data-selected; the keys, the
    strip's scrolling and the answer cover read that mark, never the strip's colours."""
    from explorer.ui.static_files import static

    assert "toggleAttribute('data-selected'" in static("token_strip.js")
    assert "hasAttribute('data-selected')" in static("page.js")  # the helpers' selectedIndex
    for name in ("keys.js", "answer_cover.js", "workshop.js", "page.js"):
        assert "backgroundcolor" not in static(name).lower() and "legend-item" not in static(name), name
    assert "selectedIndex(all)" in static("keys.js")


def expected_heatmap_parts() -> dict:
    """What the heatmap's pure parts must give, computed by the Python they mirror: the colour
    tables (explorer.viz.colours), the figure's hover template and ticks (explorer.viz.heatmap)."""
    import numpy as np

    from explorer.viz import colours, heatmap

    n = 100
    tokens = [f"t{i}" for i in range(n)]
    weights = np.tril(np.full((n, n), 1.0 / n))
    figure = heatmap.attention_heatmap(weights, tokens, tokens, causal=True, title="layer 0, head 0")
    trace, layout = figure["data"][0], figure["layout"]
    scales = {
        name: {"stops": s.stops, "table": colours.colour_table(name).tolist()} for name, s in colours.SCALES.items()
    }
    # Plotly's %{z:.4f} is d3-format's fixed point (JavaScript's toFixed), Python's f"{z:.4f}" too, but
    # for a value exactly halfway in binary (1/32 to 4 digits), which the weights here are not.
    weights_shown = [0.0, 1.0, 0.123456, 0.99996, 1e-5, 0.5, 2 / 3]
    hovers = [
        {"template": trace["hovertemplate"], "values": {"x": trace["x"][k], "y": trace["y"][q], "z": z},
         "text": filled(trace["hovertemplate"], {"x": trace["x"][k], "y": trace["y"][q], "z": z})}
        for q, k, z in zip(range(0, n, 15), range(0, n, 15), weights_shown, strict=False)
    ]  # fmt: skip

    def tick_case(axis: dict, labels: list[str], most: int, first: int, last: int) -> dict:
        zoomed = heatmap.tick_labels(labels[first:last], most)
        return {
            "labels": labels, "axis": {"tickvals": axis["tickvals"], "ticktext": axis["ticktext"]},
            "first": first, "last": last, "most": most,
            "whole": [list(pair) for pair in zip(axis["tickvals"], axis["ticktext"], strict=True)],
            "zoomed": [list(pair) for pair in zip(zoomed["tickvals"], zoomed["ticktext"], strict=True)],
        }  # fmt: skip

    ticks = [
        tick_case(layout["xaxis"], trace["x"], heatmap.MAX_KEY_LABELS, 10, 90),
        tick_case(layout["yaxis"], trace["y"], heatmap.MAX_QUERY_LABELS, 3, 100),
        tick_case(layout["xaxis"], trace["x"], heatmap.MAX_KEY_LABELS, 40, 47),
    ]
    limits = {"keys": heatmap.MAX_KEY_LABELS, "queries": heatmap.MAX_QUERY_LABELS}
    return {"scales": scales, "hovers": hovers, "ticks": ticks, "limits": limits}


def filled(template: str, values: dict) -> str:
    """A Plotly hover template filled in: %{key} as it is, %{key:.Nf} in fixed point."""

    def one(match: re.Match) -> str:
        value, digits = values[match[1]], match[2]
        return f"{value:.{digits}f}" if digits is not None and isinstance(value, float) else str(value)

    return re.sub(r"%\{(\w)(?::\.(\d)f)?\}", one, template.replace("<extra></extra>", ""))


def workshop_busy_answers() -> list[dict]:
    """The workshop long poll's "busy" answers as the server sends them (an address's, the process's)."""
    from explorer.ui import workshop_watch

    answers = [workshop_watch.busy(429, workshop_watch.ADDRESS_RETRY_S, "This address is busy"),
               workshop_watch.busy(503, workshop_watch.BUSY_RETRY_S, "The server is busy")]  # fmt: skip
    return [{"status": a.status_code, "body": json.loads(a.body)} for a in answers]


def test_the_heatmaps_pure_parts_in_node_equal_the_python_they_mirror(tmp_path):
    """tests/js/ run by node's own test runner, with the expected values computed here."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node here (scripts/install.sh --dev installs Debian's nodejs)")
    expected = tmp_path / "heatmap_expected.json"
    expected.write_text(json.dumps(expected_heatmap_parts()))
    busy = tmp_path / "workshop_busy.json"
    busy.write_text(json.dumps(workshop_busy_answers()))
    done = subprocess.run(
        [node, "--test", *sorted(str(p) for p in (ROOT / "tests" / "js").glob("*.test.js"))],
        cwd=ROOT, env={**os.environ, "HEATMAP_EXPECTED": str(expected), "WORKSHOP_BUSY_EXPECTED": str(busy)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"node --test tests/js/ failed:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
