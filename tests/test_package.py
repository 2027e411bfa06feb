"""The installable package: metadata that matches the requirements files, and ``pip install .``
in a fresh virtual environment, used from another folder (the command, the module, the embedded
translator as package data)."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def requirement_lines(name: str) -> list[str]:
    lines = (ROOT / name).read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.strip() and not line.startswith(("#", "-r", "-c"))]


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_dependencies_are_the_requirements_files():
    """A Space installs requirements.txt, pip the package's metadata: the two say the same."""
    meta = project()
    assert meta["dependencies"] == requirement_lines("requirements.txt")
    assert sorted(meta["optional-dependencies"]["dev"]) == sorted(requirement_lines("requirements-dev.txt"))
    assert set(meta["optional-dependencies"]["train"]) <= set(meta["optional-dependencies"]["dev"])
    assert meta["license"] == "Apache-2.0" and (ROOT / "LICENSE").read_text().count("Apache License") >= 1
    assert meta["scripts"]["decoder-explorer"] == "explorer.cli:main"


def test_every_package_and_page_file_is_listed():
    """A new subpackage or static file not listed in pyproject.toml works here and is missing from
    the installed package: every folder of explorer/ with an __init__.py is listed, and every
    non-Python file beside the modules matches a package-data pattern."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "explorer").rglob("__init__.py")}
    assert found <= set(setuptools["packages"]), sorted(found - set(setuptools["packages"]))
    data = setuptools["package-data"]
    for path in (ROOT / "explorer").rglob("*"):
        if path.is_file() and path.suffix not in (".py", ".pyc"):
            owner = path.parent
            while not (owner / "__init__.py").is_file():  # the package the file belongs to
                owner = owner.parent
            package, inside = ".".join(owner.relative_to(ROOT).parts), path.relative_to(owner).as_posix()
            patterns = data.get(package, [])
            assert any(fnmatch.fnmatch(inside, pattern) for pattern in patterns), f"{path} is not package data"


def run(command: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict]:
    """A new virtual environment with a copy of the repository pip-installed into it.

    The dependencies are the ones this test runs with (a .pth file puts their folder on the new
    environment's path; pip sees them as installed and installs only the package): the test is
    about the package, not about downloading torch again."""
    work = tmp_path_factory.mktemp("package")
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    copy = work / "repository"
    for name in files:
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).write_bytes((ROOT / name).read_bytes())
    venv = work / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run([sys.executable, "-m", "venv", str(venv)], work, env)
    python = venv / "bin" / "python"
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], work, env)
    Path(purelib.stdout.strip(), "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # No build isolation: the build backend comes from the test's environment too (the venv's own
    # setuptools, from ensurepip, would come first and is too old for pyproject.toml's licence).
    run([str(python), "-m", "pip", "uninstall", "-q", "-y", "setuptools"], work, env)
    run([str(python), "-m", "pip", "install", "-q", "--no-build-isolation", str(copy)], work, env)
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    return venv, env | {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}, elsewhere


@pytest.mark.slow  # a new virtual environment and a pip install: ~30 s
def test_the_command_and_the_module_answer_help(installed):
    venv, env, elsewhere = installed
    for command in ([str(venv / "bin" / "decoder-explorer"), "--help"], [str(venv / "bin" / "python"), "-m",
                                                                            "explorer", "--help"]):  # fmt: skip
        shown = run(command, elsewhere, env).stdout
        assert "--model" in shown and "--allow-dir" in shown
    assert run([str(venv / "bin" / "decoder-explorer"), "--help"], elsewhere, env).stdout.startswith(
        "usage: decoder-explorer"
    )


@pytest.mark.slow
def test_the_installed_package_translates_with_its_own_assets(installed):
    venv, env, elsewhere = installed
    code = (
        "import explorer, pathlib\n"
        "from explorer.loading.registry import ASSETS\n"
        "from explorer.ui import heatmap, layout\n"  # read heatmap.js and static/, package data too
        "package = pathlib.Path(explorer.__file__).parent\n"
        "assert 'site-packages' in str(package) and ASSETS.is_relative_to(package)\n"
        "from explorer.ui.tabs.kv_cache import CURVE_TEXT\n"  # the lab's budget-curve text, package data too
        "assert CURVE_TEXT.is_relative_to(package) and len(CURVE_TEXT.read_text()) > 8000\n"
        "session = explorer.GenerationSession(explorer.load_model('en-de-numbers', progress=False), 'twenty-one')\n"
        "while not session.finished: session.step()\n"
        "print(session.generated_text())\n"
    )
    assert run([str(venv / "bin" / "python"), "-c", code], elsewhere, env).stdout.strip() == "einundzwanzig"
