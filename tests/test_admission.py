"""Heavy work admitted in one place (explorer/admission.py): one heavy job per client, a global
limit with a waiting list, Steps first between a long prefill's chunks, and a job cancelled at its
next chunk when its client has gone; a prefill in chunks gives exactly what one pass gives."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import explorer
from explorer import admission
from explorer.admission import Admission, HeavyJobRefused, JobCancelled, StepsFirst
from explorer.session import cache_plan, passes

# Long enough for several chunks of 16 positions, short enough for the tiny models (128 positions).
LONG_TEXT = " ".join(["The quick brown fox jumps over the lazy dog."] * 2)


@pytest.fixture(scope="module", params=["gpt2", "llama", "gemma3_text", "mistral"])
def family(request, checkpoints):
    return explorer.load_model(str(checkpoints[request.param]), progress=False)


def chunked(monkeypatch, size: int) -> None:
    monkeypatch.setattr(cache_plan, "PREFILL_CHUNK", size)
    monkeypatch.setattr(passes, "PREFILL_CHUNK", size)


def test_a_prefill_in_chunks_equals_one_pass(family, monkeypatch):
    chunked(monkeypatch, 10**6)
    whole = explorer.GenerationSession(family, LONG_TEXT)
    chunked(monkeypatch, 16)
    parts = explorer.GenerationSession(family, LONG_TEXT)
    assert len(parts.token_ids) > 3 * 16  # several chunks
    assert parts.token_ids == whole.token_ids
    assert float((parts.next_logits() - whole.next_logits()).abs().max()) <= 1e-4
    for layer in range(family.config.n_layers):
        np.testing.assert_allclose(parts.self_attention(layer), whole.self_attention(layer), atol=1e-5)
    for _ in range(3):  # and the steps after it read the same cache
        assert parts.step().token_id == whole.step().token_id
    assert float((parts.next_logits() - whole.next_logits()).abs().max()) <= 1e-4


def test_the_chunks_are_cut_only_with_the_cache(monkeypatch):
    chunked(monkeypatch, 16)
    plan = cache_plan.FullCache(None, None)
    assert plan.passes(0, 40, 40, use_cache=True) == [(0, 16), (16, 32), (32, 40)]
    assert plan.passes(0, 40, 40, use_cache=False) == [(0, 40)]
    assert plan.passes(39, 40, 40, use_cache=True) == [(39, 40)]


def in_another_thread(gate: Admission, client: str, what: str) -> Exception | None:
    """Run an empty heavy job of ``client`` in a thread of its own (as another event would); its error."""
    errors: list[Exception] = []

    def run():
        try:
            with gate.heavy(client, what):
                pass
        except Exception as error:
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(5)
    return errors[0] if errors else None


def test_a_clients_second_heavy_job_waits_for_its_first_and_too_many_are_refused():
    gate = Admission(limit=2, waiting=4, per_client=2)
    told: list[str] = []
    order: list[str] = []

    def second():
        with gate.heavy("10.0.0.1", "Compare", told=told.append):
            order.append("second")

    with gate.heavy("10.0.0.1", "A prefill"):
        waiting = threading.Thread(target=second)
        waiting.start()
        while gate.waiting == 0:
            time.sleep(0.01)
        assert in_another_thread(gate, "10.0.0.2", "Compare") is None  # another client goes ahead of it
        refused = in_another_thread(gate, "10.0.0.1", "A lab run")  # a third of one client: past per_client
        assert isinstance(refused, HeavyJobRefused) and "already has 2 long job(s)" in str(refused)
        order.append("first")
    waiting.join(5)
    assert order == ["first", "second"] and told == ["Waiting for 1 other long job(s) to finish…"]
    assert gate.running == 0 and gate.waiting == 0


def test_a_job_waits_for_a_place_and_is_told_where():
    gate = Admission(limit=1, waiting=4)
    told: list[str] = []
    order: list[str] = []
    first_in = threading.Event()
    release = threading.Event()

    def first():
        with gate.heavy("a", "A prefill"):
            first_in.set()
            release.wait(5)
            order.append("a")

    def second():
        with gate.heavy("b", "Compare", told=told.append):
            order.append("b")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    first_in.wait(5)
    threads[1].start()
    while gate.waiting == 0:
        time.sleep(0.01)
    release.set()
    for thread in threads:
        thread.join(5)
    assert order == ["a", "b"]
    assert told == ["Waiting for 1 other long job(s) to finish…"]


def test_a_full_waiting_list_refuses_at_once():
    gate = Admission(limit=1, waiting=0)
    with gate.heavy("a", "A prefill"):
        refused = in_another_thread(gate, "b", "Compare")
    assert isinstance(refused, HeavyJobRefused) and "try again in a minute" in str(refused)


def test_a_waiting_job_whose_client_has_gone_leaves_the_line():
    gate = Admission(limit=1, waiting=4)
    errors: list[Exception] = []

    def waiter():
        try:
            with gate.heavy("b", "Compare", gone=lambda: True):
                pass
        except JobCancelled as error:
            errors.append(error)

    with gate.heavy("a", "A prefill"):
        thread = threading.Thread(target=waiter)
        thread.start()
        thread.join(5)
    assert len(errors) == 1 and gate.waiting == 0 and gate.running == 0


def test_a_prefill_whose_client_has_gone_stops_at_its_next_chunk(checkpoints, monkeypatch):
    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    chunked(monkeypatch, 16)
    passes_run: list[tuple[int, int]] = []
    real_pass = passes.SessionPasses.pass_over

    def counted(self, start, end):
        passes_run.append((start, end))
        return real_pass(self, start, end)

    monkeypatch.setattr(passes.SessionPasses, "pass_over", counted)
    left = {"gone": False}

    def gone():  # the client leaves once the first chunk has run
        left["gone"] = left["gone"] or len(passes_run) >= 1
        return left["gone"]

    with pytest.raises(JobCancelled), Admission(limit=1).heavy("a", "A prefill", gone=gone):
        explorer.GenerationSession(loaded, LONG_TEXT)
    assert passes_run == [(0, 16)]  # cancelled at the first chunk's end, not after the whole text


def test_a_restored_session_whose_client_has_gone_stops_within_a_chunk(checkpoints, monkeypatch):
    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    chunked(monkeypatch, 8)
    monkeypatch.setattr(explorer.session.generation, "PREFILL_CHUNK", 8)
    tokens = explorer.GenerationSession(loaded, "The").token_ids * 40
    session = explorer.GenerationSession(loaded, "The")
    gone = lambda: len(session.token_ids) > 10  # noqa: E731
    with pytest.raises(JobCancelled), Admission(limit=1).heavy("a", "A restored session", gone=gone):
        session.replay(tokens)
    assert len(session.token_ids) <= 1 + 16


def test_between_chunks_waits_for_the_steps_first(monkeypatch):
    first = StepsFirst()
    monkeypatch.setattr(admission, "STEPS_FIRST", first)
    ran: list[str] = []

    def a_step():
        with first.step():
            time.sleep(0.2)
            ran.append("step")

    with Admission(limit=1).heavy("a", "A prefill"):
        stepping = threading.Thread(target=a_step)
        stepping.start()
        while first.pending == 0:
            time.sleep(0.005)
        admission.between_chunks()
        ran.append("chunk")
        stepping.join(5)
    assert ran == ["step", "chunk"]


def test_outside_a_heavy_job_between_chunks_waits_for_nothing(monkeypatch):
    first = StepsFirst()
    monkeypatch.setattr(admission, "STEPS_FIRST", first)
    with first.step():  # a Step pending forever: a chunk outside any heavy job does not wait for it
        admission.between_chunks()


def test_a_heavy_job_inside_another_is_part_of_it():
    gate = Admission(limit=1, waiting=0)
    with gate.heavy("a", "Compare") as outer:
        with gate.heavy("a", "A prefill") as inner:
            assert inner is outer
        assert gate.running == 1
