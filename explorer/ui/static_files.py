"""The page's own script and style files (explorer/ui/static/), read once as the page is built."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"


def static(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")
