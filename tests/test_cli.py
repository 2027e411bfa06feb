"""The command that starts the app (python app.py, python -m explorer): its options and --help."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import gradio as gr
import pytest

from explorer import cli
from explorer.present import model_store, session_keeper
from explorer.ui.layout import TEXT_ENV, build_page
from tests.conftest import STARTING_ENVIRONMENT

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = ("--model", "--text", "--host", "--port", "--share", "--allow-dir", "--models", "--model-memory-mb",
           "--session-memory-mb", "--session-idle-minutes", "--sessions-per-address")  # fmt: skip


@pytest.mark.parametrize("command", [["app.py"], ["-m", "explorer"]])
def test_help_lists_the_options_and_starts_nothing(command):
    # A server would never exit: the timeout would fail the test.
    done = subprocess.run([sys.executable, *command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert all(option in done.stdout for option in OPTIONS), done.stdout


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model", "no-such-model"], "not one of smollm2-135m-instruct"),
        (["--allow-dir", "/no/such/dir"], "no such folder"),
        (["--models", "en-de-numbers,nope"], "'nope': name models of smollm2-135m-instruct"),
        (["--models", "en-de-numbers", "--model", "smollm2-135m-instruct"], "not among --models en-de-numbers"),
        (["--model-memory-mb", "lots"], "'lots' is not a number above 0"),
    ],
)
def test_bad_options_say_what_is_wrong_and_start_nothing(argv, says, capsys, monkeypatch):
    monkeypatch.setattr("explorer.ui.app.launch", lambda **kwargs: pytest.fail("started a server"))
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2 and says in capsys.readouterr().err


def test_the_options_reach_the_app(capsys, monkeypatch, tmp_path):
    for name in (model_store.MODEL_ENV, model_store.MODEL_DIRS_ENV, TEXT_ENV, model_store.MODELS_ENV,
                 model_store.MODEL_MEMORY_ENV):  # fmt: skip
        monkeypatch.delenv(name, raising=False)  # conftest's environment_put_back restores them
    launched = {}
    monkeypatch.setattr("explorer.ui.app.launch", lambda **kwargs: launched.update(kwargs))
    cli.main(["--model", "en-de-numbers", "--text", "twenty-one", "--host", "0.0.0.0", "--port", "7999",
              "--allow-dir", str(tmp_path), "--models", "en-de-numbers,gemma-3-270m",
              "--model-memory-mb", "900"])  # fmt: skip
    assert model_store.offered_names() == {"en-de-numbers", "gemma-3-270m"}
    assert model_store.memory_budget_bytes() == 900 * 2**20
    assert launched == {"server_name": "0.0.0.0", "server_port": 7999, "share": False}
    assert model_store.default_model_name() == "en-de-numbers"
    assert model_store.allowed_model_dirs() == [tmp_path.resolve()]
    said = capsys.readouterr().out
    assert "http://0.0.0.0:7999" in said and "en-de-numbers" in said and "cached in" in said
    with gr.Blocks():
        page = build_page("x" * 32)
    assert page.text.value == "twenty-one" and page.model.value == "en-de-numbers"
    assert [name for _, name in page.model.choices] == ["gemma-3-270m", "en-de-numbers"]  # only those offered
    assert [name for _, name in page.two_models_second.choices] == ["gemma-3-270m", "en-de-numbers"]


def test_the_session_options_reach_the_keeper(monkeypatch):
    for env in cli.SESSION_OPTIONS.values():
        monkeypatch.delenv(env, raising=False)  # conftest's environment_put_back restores them
    monkeypatch.setattr("explorer.ui.app.launch", lambda **kwargs: None)
    cli.main(["--session-memory-mb", "500", "--session-idle-minutes", "0.5", "--sessions-per-address", "7"])
    keeper = session_keeper.SessionKeeper()  # as the app's keeper reads them when it starts
    assert (keeper.memory_bytes, keeper.idle_s, keeper.per_address) == (500 * 2**20, 30.0, 7)


@pytest.mark.parametrize("argv", [["--session-memory-mb", "-1"], ["--session-idle-minutes", "nan"],
                                  ["--sessions-per-address", "2.5"]])  # fmt: skip
def test_a_session_limit_that_is_no_positive_number_is_refused(argv, capsys, monkeypatch):
    monkeypatch.setattr("explorer.ui.app.launch", lambda **kwargs: pytest.fail("started a server"))
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2 and "is not a number above 0" in capsys.readouterr().err


def test_the_options_do_not_outlive_their_test():
    """Runs after the test above, in this file's order: ``cli.main`` set the model a page opens
    with, and the browser tests' apps (their environment is this process's) would all open the
    translator (tests/conftest.py's environment_put_back)."""
    assert os.environ.get(model_store.MODEL_ENV) == STARTING_ENVIRONMENT.get(model_store.MODEL_ENV)
    assert os.environ.get(TEXT_ENV) == STARTING_ENVIRONMENT.get(TEXT_ENV)


def test_a_share_link_the_network_refuses_is_said_plainly():
    """--share with no network: the app serves on locally and says why there is no link."""
    from tests.browser.conftest import NETCUT, free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(NETCUT), "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "explorer", "--share", "--port", str(port)], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(server.stdout), daemon=True).start()  # reads until it exits
    try:
        deadline = time.time() + 180
        while not any("No share link" in line for line in lines) and time.time() < deadline and server.poll() is None:
            time.sleep(0.2)
        said = "".join(lines)
        assert "No share link: the network refused it" in said, said
        assert f"runs on at http://127.0.0.1:{port}" in said
        assert server.poll() is None  # still serving
    finally:
        server.terminate()
        server.wait(timeout=20)
