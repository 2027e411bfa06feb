"""The README's Python example runs as written (offline, on the embedded SmolLM2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.slow
def test_readme_python_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has no Python example"
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct" in out and "Paris" in out


def test_readme_quick_start_commands_exist():
    text = README.read_text()
    for script in ("scripts/run.sh", "scripts/test.sh"):
        assert f"bash {script}" in text
        assert (README.parent / script).is_file()
    ci = (README.parent / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci
