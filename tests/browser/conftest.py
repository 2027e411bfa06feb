"""Start the app in a subprocess and drive it with Playwright in Debian's Chromium."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync",
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def app_url(checkpoints):
    port = free_port()
    env = dict(os.environ)
    env.update(
        GRADIO_SERVER_NAME="127.0.0.1",
        GRADIO_SERVER_PORT=str(port),
        GRADIO_ANALYTICS_ENABLED="False",
        DECODER_EXPLORER_MODEL_DIRS=str(checkpoints["marian"].parent),
        PYTHONUNBUFFERED="1",
    )
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "app.log", "w")  # noqa: SIM115 - closed at teardown
    process = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the app exited with {process.returncode}; see {ARTIFACTS / 'app.log'}")
        try:
            urllib.request.urlopen(url, timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        process.kill()
        raise RuntimeError("the app did not start within 180 s")
    yield url
    process.terminate()
    process.wait(timeout=20)
    log.close()
    # A callback that failed on the server shows the user nothing useful: none may fail.
    server_log = (ARTIFACTS / "app.log").read_text()
    assert "Traceback" not in server_log, f"the app raised errors; see {ARTIFACTS / 'app.log'}"


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (the README's test command does)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(app_url)
    wait_ready(page)
    yield page
    context.close()


def wait_ready(page) -> None:
    page.wait_for_selector("#token-strip .token", timeout=180_000)
    page.wait_for_function(
        "() => { const g = document.querySelector('#self-attention .js-plotly-plot'); return g && g.data; }"
    )
