"""The harness the browser tests stand on: an app whose port another process took starts again
on another port, instead of failing the test that asked for it."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from tests.browser import conftest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_port_taken_before_the_app_binds_it_is_traded_for_another(tmp_path, monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1], conftest.free_port()])
        monkeypatch.setattr(conftest, "free_port", lambda: next(ports))
        log = tmp_path / "app.log"
        with conftest.running_app(log) as (url, _):
            assert urllib.request.urlopen(url, timeout=10).status == 200
            assert not url.endswith(f":{taken.getsockname()[1]}")
        assert any(reason in log.read_text() for reason in conftest.PORT_TAKEN)


def test_a_wait_that_times_out_says_what_it_waited_for_and_where(browser):
    """A browser test that waits instead of asserting fails naming its condition and its line, not
    as a bare "Timeout 120000ms exceeded." (issue 42)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    context = browser.new_context()
    page = context.new_page()
    page.set_content("<p id='here'>here</p>")
    try:
        with pytest.raises(PlaywrightTimeoutError) as waited:
            page.wait_for_function("n => document.querySelectorAll('p').length === n", arg=2, timeout=300)
        said = str(waited.value)
        assert "document.querySelectorAll('p').length === n" in said and "with arg 2" in said
        assert "tests/browser/test_harness.py:" in said and "Timeout 300ms exceeded" in said
        with pytest.raises(PlaywrightTimeoutError, match="#absent"):
            page.wait_for_selector("#absent", timeout=300)
        with pytest.raises(PlaywrightTimeoutError, match=r"#here.*to be hidden"):
            page.locator("#here").wait_for(state="hidden", timeout=300)
    finally:
        context.close()
