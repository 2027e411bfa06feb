"""Sessions with a life and a budget, at the running app through Gradio's queue protocol, as a raw
client speaks it (no browser, so no heartbeat and no unload): past the sessions' memory budget the
least recently used idle session is put aside and comes back with its own tokens; after the idle
time every session is released (issue 58, item 2)."""

from __future__ import annotations

import time

from tests.browser.conftest import running_app, tracebacks
from tests.browser.helpers import ARTIFACTS
from tests.browser.load import SETTINGS, outputs_by_label
from tests.browser.page_client import PageClient

TEXT = "three hundred and forty-two thousand five hundred and sixty-seven"
MODEL = "en-de-numbers"  # the embedded translator: small, and always here
IDLE_MINUTES = 0.25  # 15 s: the sweeper looks every few seconds


def tokens(client: PageClient, api_name: str, values) -> list[str]:
    return [text for text, _ in outputs_by_label(client, api_name, values)["strip"]]


def said(values) -> str:
    """Every text output of an event (the status line is one of them)."""
    return " ".join(v for v in values if isinstance(v, str))


def released(log_path, n: int, timeout: float) -> bool:
    """Whether the app logged ``n`` sessions released after their idle time, within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log_path.read_text().count("released a session unused for") >= n:
            return True
        time.sleep(0.5)
    return False


def test_a_raw_clients_session_is_put_aside_comes_back_and_is_released_after_its_idle_time():
    model = MODEL
    log_path = ARTIFACTS / "app-sessions.log"
    log_path.unlink(missing_ok=True)
    env = {
        "DECODER_EXPLORER_SESSION_MEMORY_MB": "0.01",  # any idle session is past it
        "DECODER_EXPLORER_SESSION_IDLE_MINUTES": str(IDLE_MINUTES),
    }
    with running_app(log_path, **env) as (url, _):
        first, second = PageClient(url), PageClient(url)
        try:
            first.predict(model, TEXT, *SETTINGS, None, api_name="/on_load")
            first.predict(TEXT, *SETTINGS, api_name="/on_step")
            before = tokens(first, "/on_step", first.predict(TEXT, *SETTINGS, api_name="/on_step"))
            second.predict(model, TEXT, *SETTINGS, None, api_name="/on_load")  # the first is put aside after it
            assert "put aside an idle session" in log_path.read_text()

            stepped = first.predict(TEXT, *SETTINGS, api_name="/on_step")
            assert tokens(first, "/on_step", stepped)[: len(before)] == before  # its own tokens, and one more
            assert len(tokens(first, "/on_step", stepped)) == len(before) + 1
            assert f"read again from its {len(before)} tokens" in said(stepped)

            assert released(log_path, 2, timeout=IDLE_MINUTES * 60 + 30), log_path.read_text()[-2000:]
            again = first.predict(TEXT, *SETTINGS, api_name="/on_step")  # refused with a warning: no new session
            assert "read again" not in said(again)
        finally:
            first.close()
            second.close()
    log = log_path.read_text()
    assert not tracebacks(log), log[-3000:]
