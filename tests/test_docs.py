"""The documentation: a short README that is a front door, and a MkDocs site that builds with
``--strict`` (a broken link or a page left out of the navigation fails), every page linked."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def nav_pages() -> list[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    return [page for entry in config["nav"] for page in entry.values()]


def test_the_site_builds_strictly(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for page in nav_pages():
        built = tmp_path / "site" / ("index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html")
        assert built.is_file(), page


def test_every_page_is_in_the_navigation_and_linked_from_the_readme():
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert sorted(nav_pages()) == pages
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", readme))
    assert linked == set(pages) - {"index.md"}, sorted(set(pages) - linked)
    for target in re.findall(r"\]\(([^)#]+)\)", readme):  # every relative link of the README resolves
        if "://" not in target:
            assert (ROOT / target).exists(), target


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    assert (DOCS / "screenshot.png").is_file() and "(docs/screenshot.png)" in "\n".join(lines)
    assert (ROOT / "CHANGELOG.md").is_file() and "(CHANGELOG.md)" in "\n".join(lines)
