"""The page's side of the admission (explorer/ui/heavy.py): a heavy callback runs as its client's
one heavy job (a second from the same address is told to wait, in a sentence), and a job whose
client's stream closed (Gradio's queue marks the event not alive) is cancelled."""

from __future__ import annotations

import contextvars
import threading
from types import SimpleNamespace

import gradio as gr
import pytest
from gradio.context import LocalContext

from explorer import admission
from explorer.admission import Admission, JobCancelled
from explorer.ui import heavy
from explorer.ui.gradio_private import this_event_gone
from explorer.ui.tab import tab_event


@pytest.fixture(autouse=True)
def own_admission(monkeypatch):
    gate = Admission(limit=2, waiting=4, per_client=1)
    monkeypatch.setattr(heavy, "ADMISSION", gate)
    return gate


def in_event(address: str, alive: bool = True, event_id: str = "e1", said: list | None = None) -> contextvars.Context:
    """A context as Gradio's queue gives a callback: its request (from ``address``) and its event;
    what it tells the page (gr.Info, gr.Warning) goes to ``said``."""
    context = contextvars.copy_context()

    def enter():
        event = SimpleNamespace(alive=alive)
        told = (lambda **message: said.append(message["log"])) if said is not None else None
        queue = SimpleNamespace(event_ids_to_events={event_id: event}, log_message=told)
        LocalContext.blocks.set(SimpleNamespace(_queue=queue))
        LocalContext.event_id.set(event_id)
        LocalContext.request.set(gr.Request(client={"host": address}, session_hash="s"))

    context.run(enter)
    return context


def test_the_event_is_gone_when_the_queue_marks_it_not_alive():
    assert in_event("10.0.0.1", alive=False).run(this_event_gone)
    assert not in_event("10.0.0.1", alive=True).run(this_event_gone)
    assert not this_event_gone()  # outside an event: never


def test_a_second_heavy_event_of_one_address_is_told_to_wait_for_the_first(own_admission):
    started, release = threading.Event(), threading.Event()

    @tab_event
    @heavy.heavy_event("Compare")
    def on_compare(st):
        started.set()
        release.wait(5)
        return {"done": True}

    first = threading.Thread(target=lambda: in_event("10.0.0.1").run(on_compare, None))
    first.start()
    started.wait(5)
    said: list[str] = []
    second = in_event("10.0.0.1", event_id="e2", said=said).run(on_compare, None)
    assert second == gr.skip()  # the page stays as it was, and says why
    assert said == [
        "Your address already has 1 long job(s) running or waiting (a long text, Compare or a lab run; "
        "a class behind one router shares an address): wait for one to finish, then try again."
    ]
    assert in_event("10.0.0.2", event_id="e3").run(lambda: heavy.client()) == "10.0.0.2"
    release.set()
    first.join(5)
    assert own_admission.running == 0


def test_a_heavy_job_whose_client_has_gone_is_cancelled_at_its_next_chunk():
    def run():
        with heavy.heavy_job("A prefill"):
            admission.between_chunks()

    with pytest.raises(JobCancelled):
        in_event("10.0.0.1", alive=False).run(run)
    in_event("10.0.0.1", alive=True).run(run)  # a client that is there goes on


def test_a_long_text_is_heavy_and_a_short_one_is_not():
    assert heavy.long_text("word " * 300) and not heavy.long_text("The capital of France is")
    assert not heavy.long_text(None)
