"""The page's own scripts as code: what they read from the page, and their pure parts run in node
(tests/js/) against the Python they mirror."""

from __future__ import annotations

import re

from explorer.ui import layout, views


def test_the_page_script_finds_the_query_token_without_knowing_its_colour():
    """The arrow keys and the strip's scrolling find the query token by the strip's own legend: no
    colour of the palette is written into the script, so changing one cannot break them silently."""
    script = layout.PAGE_SCRIPT.lower()
    for kind, colour in views.STRIP_COLORS.items():
        rgb = ", ".join(str(int(colour[i : i + 2], 16)) for i in (1, 3, 5))
        assert colour.lower() not in script and rgb not in script, f"page.js names the strip's {kind} colour"
    assert re.search(r"legend-item", script) and "=== 'query'" in script
