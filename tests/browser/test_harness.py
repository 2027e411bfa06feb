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
