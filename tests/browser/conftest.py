"""Start the app in a subprocess and drive it with Playwright in Debian's Chromium."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.browser.helpers import APP_LOG

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


NETCUT = ROOT / "tests" / "netcut"  # its sitecustomize cuts the app off the network


PORT_TAKEN = ("Cannot find empty port", "address already in use")  # what Gradio says when its port is taken


@contextlib.contextmanager
def running_app(log_path: Path, port: int | None = None, **env_overrides: str):
    """Start ``python app.py`` with the network cut off; yield (its URL, its process); stop it.

    ``port`` lets a test start the app again where it was (a browser keeps its storage per origin):
    the app waits until the previous one has let the port go. A port chosen here was free when it
    was chosen, but another process may take it before the app binds it: the app then exits saying
    so, and starts again on another port.

    The app must start and serve with no network at all (not only with HF_HUB_OFFLINE set),
    as on this project's machines and on a Space whose Hub is down.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):
        chosen = port or free_port()
        if port:
            wait_until_free(port)
        started = log_path.stat().st_size if log_path.exists() else 0
        process = start_app(log_path, chosen, env_overrides)
        url = f"http://127.0.0.1:{chosen}"
        try:
            if wait_serving(process, url, log_path, started):
                break
        except BaseException:
            stop_app(process)
            raise
        if port or attempt == 2:
            raise RuntimeError(f"port {chosen} was taken; see {log_path}")
    try:
        yield url, process
    finally:
        stop_app(process)


def start_app(log_path: Path, port: int, env_overrides: dict) -> subprocess.Popen:
    env = cut_off_env(GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port), **env_overrides)
    with open(log_path, "a") as log:
        return subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def cut_off_env(**overrides: str) -> dict:
    """This process's environment for an app process with no network (tests/netcut), plus ``overrides``."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(
        GRADIO_ANALYTICS_ENABLED="False",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join([str(NETCUT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    return {**env, **overrides}


REPLICA_SECRET = "a key the test's replicas share, not secret"


@contextlib.contextmanager
def running_replicas(run_dir: Path, count: int = 2, **env_overrides: str):
    """``python -m explorer.serve``: ``count`` replicas of the app behind nginx, with no network; yield
    (nginx's URL, the supervisor's process, its run folder); stop everything it started."""
    run_dir.mkdir(parents=True, exist_ok=True)
    env = cut_off_env(DECODER_EXPLORER_BROWSER_SECRET=REPLICA_SECRET, **env_overrides)
    argv = [sys.executable, "-m", "explorer.serve", "--replicas", str(count), "--port", str(free_port()),
            "--run-dir", str(run_dir)]  # fmt: skip
    with open(run_dir / "serve.log", "a") as log:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = wait_replicas(process, run_dir)
        yield url, process, run_dir
    finally:
        stop_app(process, grace_s=60)


def wait_replicas(process: subprocess.Popen, run_dir: Path, timeout: float = 300) -> str:
    """nginx's URL once the supervisor says everything serves (its replicas.json names nginx)."""
    deadline = time.time() + timeout
    state = run_dir / "replicas.json"
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"explorer.serve exited with {process.returncode}: {(run_dir / 'serve.log').read_text()}"
            )
        if state.exists() and json.loads(state.read_text()).get("nginx_pid"):
            return json.loads(state.read_text())["url"]
        if time.time() > deadline:
            raise RuntimeError(f"the replicas did not serve within {timeout} s; see {run_dir}")
        time.sleep(0.5)  # polling the supervisor's state file


def wait_serving(process: subprocess.Popen, url: str, log_path: Path, log_start: int) -> bool:
    """True once the app answers at ``url``; False if it exited because its port was taken."""
    deadline = time.time() + 180
    while True:
        if process.poll() is not None:
            with open(log_path, "rb") as log:
                log.seek(log_start)
                said = log.read().decode("utf-8", "replace")
            if any(reason in said for reason in PORT_TAKEN):
                return False
            raise RuntimeError(f"the app exited with {process.returncode}; see {log_path}")
        if time.time() > deadline:
            raise RuntimeError("the app did not start within 180 s")
        try:
            urllib.request.urlopen(url, timeout=2)
            return True
        except OSError:
            time.sleep(0.5)  # polling the app's state: it answers once it serves


def wait_until_free(port: int, timeout: float = 30) -> None:
    """Until nothing holds ``port`` (the previous app's socket may linger a moment after it exits)."""
    deadline = time.time() + timeout
    while True:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no hold
            try:
                s.bind(("127.0.0.1", port))
                return
            except OSError:
                if time.time() > deadline:
                    raise
        time.sleep(0.2)


def stop_app(process: subprocess.Popen, grace_s: float = 20) -> None:
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="session")
def app_process(checkpoints):
    """The app every browser test shares: (its URL, its process)."""
    APP_LOG.unlink(missing_ok=True)  # running_app appends (a restarted app writes on in one log)
    with running_app(APP_LOG, DECODER_EXPLORER_MODEL_DIRS=str(checkpoints["marian"].parent)) as started:
        yield started


@pytest.fixture(scope="session")
def app_url(app_process):
    return app_process[0]


@pytest.fixture(autouse=True)
def no_traceback_in_the_app_log(request):
    """A traceback in the shared app's log is a bug, reported by the test during which it was
    logged. A refusal (a bad value sent on purpose) is one line in the log, never a traceback."""
    if "app_url" not in request.fixturenames:
        yield
        return
    start = APP_LOG.stat().st_size if APP_LOG.exists() else 0
    yield
    with open(APP_LOG, "rb") as log:
        log.seek(start)
        failures = tracebacks(log.read().decode("utf-8", "replace"))
    assert not failures, f"the app logged a traceback during this test (see {APP_LOG}): {failures}"


def tracebacks(log: str) -> list[str]:
    """The last line of every traceback in the log."""
    found = []
    for block in log.split("Traceback (most recent call last):")[1:]:
        last = next((line for line in block.splitlines() if re.match(r"^[\w.]+(Error|Exception)\b", line)), "")
        found.append(last or block[:200])
    return found


@pytest.fixture(scope="session", autouse=True)
def waits_say_what_they_waited_for():
    """A wait that times out names its condition and the test's line (tests/browser/waits.py)."""
    from tests.browser.waits import named_waits

    with named_waits():
        yield


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
        "() => { const g = document.querySelector('#self-attention .attention-figure'); return g && g.data; }"
    )
