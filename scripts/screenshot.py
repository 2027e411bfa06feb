"""Make docs/screenshot.png, the picture the README and the docs open with: the app on its default
model after five Steps, layer 3, at 1280x720 (a projector's size), in Debian's Chromium.

    .venv/bin/python scripts/screenshot.py [--out docs/screenshot.png]

Starts the app as the browser tests do (network cut off), so the picture is of this checkout.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, running_app, wait_ready  # noqa: E402
from tests.browser.helpers import choose_layer, idle, wait_token_count  # noqa: E402

STEPS = 5
LAYER = 3


def take(url: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.set_default_timeout(180_000)
        page.goto(url)
        wait_ready(page)
        for _ in range(STEPS):
            before = len(page.query_selector_all("#token-strip .token"))
            page.click("#step")
            wait_token_count(page, before + 1)
            idle(page)
        choose_layer(page, LAYER)
        page.wait_for_function(
            "(n) => (document.querySelector('#self-attention .attention-figure')?.layout?.title?.text || '')"
            ".includes(`layer ${n}`)",
            arg=LAYER,
        )
        idle(page)
        page.mouse.move(0, 0)  # no hover text over the figure
        page.screenshot(path=str(out))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshot.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, running_app(Path(folder) / "app.log") as (url, _):
        take(url, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
