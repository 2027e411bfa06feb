"""Sessions with a life and a budget (issue 58, item 2): a session nobody touches for the idle time
is released, heartbeat or not; past the memory budget the least recently used idle session is put
aside (its tokens kept) and read again when its tab comes back; an address holds a capped number
of live sessions. Tiny models, a clock the tests advance: no sleeps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from explorer.errors import InputError
from explorer.present import session_keeper
from explorer.present.session_keeper import KEEPER
from explorer.ui import events, lifecycle, tab

SETTINGS = (False, True, 0.0, 0, 1.0, 0)  # chat, cache, temperature, top-k, top-p, seed
TEXT = "one two three four five six seven"
IDLE_S = 600.0


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    """The server's keeper on a clock the test advances, with no tab of another test in it."""
    kept = (KEEPER.clock, KEEPER.idle_s, KEEPER.memory_bytes, KEEPER.per_address, KEEPER.on_end)
    clock = Clock()
    KEEPER.clock, KEEPER.idle_s, KEEPER.memory_bytes, KEEPER.per_address, KEEPER.on_end = clock, IDLE_S, 2**40, 20, []
    KEEPER.tabs.clear()
    yield clock
    KEEPER.clock, KEEPER.idle_s, KEEPER.memory_bytes, KEEPER.per_address, KEEPER.on_end = kept
    KEEPER.tabs.clear()


def request(name: str, address: str = "10.0.0.1"):
    return SimpleNamespace(session_hash=name, client=SimpleNamespace(host=address))


def opened(model: str, name: str, address: str = "10.0.0.1", steps: int = 2):
    """A tab that chose ``model`` and stepped ``steps`` times, as its events do (through the keeper)."""
    out = lifecycle.on_model_change(request(name, address), model, None, TEXT, *SETTINGS)
    st = out["state"]
    for _ in range(steps):
        events.on_step(st, TEXT, *SETTINGS)
    return st


@pytest.fixture
def model(checkpoints):
    return str(checkpoints["llama"])


def test_a_session_untouched_for_the_idle_time_is_released_without_any_heartbeat(clock, model):
    st = opened(model, "raw-client")  # no browser, no unload: only its events
    clock.now += IDLE_S - 1
    KEEPER.sweep()
    assert st.session is not None  # not yet

    clock.now += 2
    KEEPER.sweep()
    assert st.session is None and st.life.put_aside is None  # tensors and tokens gone
    assert "raw-client" not in KEEPER.tabs
    with pytest.raises(InputError, match=r"closed after 10 minutes without use.*Reload the page"):
        tab.current(st, TEXT, *SETTINGS)  # a Step says so instead of starting the box's text silently


def test_a_session_used_meanwhile_lives_on(clock, model):
    st = opened(model, "used")
    clock.now += IDLE_S - 1
    events.on_step(st, TEXT, *SETTINGS)
    clock.now += IDLE_S - 1
    KEEPER.sweep()
    assert st.session is not None


def test_a_released_tab_that_chooses_a_model_again_is_counted_again(clock, model):
    st = opened(model, "back-later")
    clock.now += IDLE_S + 1
    KEEPER.sweep()
    events.on_reset(st, TEXT, *SETTINGS)  # Reset: a new session of the box's text
    assert st.session is not None and not st.life.ended and "back-later" in KEEPER.tabs
    clock.now += IDLE_S + 1
    KEEPER.sweep()
    assert st.session is None


def test_past_the_budget_the_least_recently_used_idle_session_is_put_aside_and_comes_back(clock, model):
    first = opened(model, "first", steps=3)
    first.layer, first.head, first.query = 1, "1", 2
    tokens, generated = list(first.session.token_ids), list(first.session.generated_ids)
    expected_next = first.session.fork().step().token_id  # what its next step gives, never put aside
    clock.now += 1
    second = opened(model, "second")
    one_session = second.session.held_bytes()
    assert one_session > 0
    KEEPER.memory_bytes = int(2.5 * one_session)
    clock.now += 1
    third = opened(model, "third")  # past the budget after this one's event

    assert first.session is None and first.life.put_aside.generated == generated  # its tokens kept
    assert second.session is not None and third.session is not None

    clock.now += 1
    out = events.on_step(first, TEXT, *SETTINGS)  # its owner comes back: read again, then stepped
    assert first.session.token_ids[: len(tokens)] == tokens
    assert first.session.token_ids[len(tokens)] == expected_next
    assert (first.layer, first.head, first.query) == (1, "1", None)  # the view (a Step follows the newest token)
    assert f"read again from its {len(tokens):,} tokens" in out["status"]
    assert second.session is None  # now the least recently used idle one


def test_a_session_whose_tab_runs_an_event_is_never_put_aside(clock, model):
    busy = opened(model, "busy")
    clock.now += 1
    idle = opened(model, "idle")
    clock.now += 1
    KEEPER.memory_bytes = 1  # every session is past it
    with busy.lock:  # an event of the busy tab is running
        KEEPER.keep_limits()
    assert busy.session is not None and idle.session is None


def test_a_generate_keeps_its_session_between_steps(clock, model):
    st = opened(model, "generating", steps=0)
    KEEPER.memory_bytes = 1
    run = events.on_generate(st, 3, TEXT, *SETTINGS)
    next(run)  # one step sent; the tab's lock is free until the next
    KEEPER.keep_limits()
    assert st.session is not None
    list(run)
    assert len(st.session.generated_ids) == 3


def test_an_address_past_its_cap_has_its_oldest_idle_session_put_aside(clock, model):
    KEEPER.per_address = 2
    school = [opened(model, f"pupil-{i}", address="192.0.2.7", steps=1) for i in range(2)]
    clock.now += 1
    elsewhere = opened(model, "elsewhere", address="198.51.100.1", steps=1)
    clock.now += 1
    school.append(opened(model, "pupil-2", address="192.0.2.7", steps=1))

    assert school[0].session is None and school[0].life.put_aside is not None  # kept as tokens, not refused
    assert school[1].session is not None and school[2].session is not None
    assert elsewhere.session is not None  # another address is not its business
    events.on_step(school[0], TEXT, *SETTINGS)  # and back it comes
    assert school[0].session is not None and len(school[0].session.generated_ids) == 2


def test_the_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(session_keeper.MEMORY_ENV, "500")
    monkeypatch.setenv(session_keeper.IDLE_ENV, "0.5")
    monkeypatch.setenv(session_keeper.PER_ADDRESS_ENV, "7")
    keeper = session_keeper.SessionKeeper()
    assert (keeper.memory_bytes, keeper.idle_s, keeper.per_address) == (500 * 2**20, 30.0, 7)
    monkeypatch.setenv(session_keeper.IDLE_ENV, "soon")
    assert session_keeper.SessionKeeper().idle_s == session_keeper.IDLE_MINUTES * 60
