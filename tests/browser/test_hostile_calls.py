"""Issue 58, item 5: a stranger's malformed calls, sent as a raw client speaks Gradio's queue
protocol (no browser), leave no traceback in the log and a bounded line for each refusal.

The issue saw a 5 MB dropdown value written to the log whole (and sent back), ``None.strip()`` in
the model store when a model name was null or an object, and Gradio's ~40-line traceback for a
call with too few input values. The app here opens the translator (small: it starts fast)."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.browser.conftest import running_app, tracebacks

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The public API and the page's events that take a model name (and a few that take none).
EVENTS = ("/step", "/load_model", "/attention", "/generate", "/translate", "/on_model_change", "/on_custom_model",
          "/on_load", "/on_step", "/on_unload", "/on_read_both")  # fmt: skip
HUGE = "Z" * 100_000


class RawClient:
    """Joins Gradio's queue with whatever data it is given and reads the answer: a stranger's client."""

    def __init__(self, url: str):
        self.http = httpx.Client(base_url=url, timeout=httpx.Timeout(120.0))
        self.config = self.http.get("/config").json()
        self.prefix = self.config.get("api_prefix", "/gradio_api")
        self.components = {c["id"]: c for c in self.config["components"]}
        self.events = {f"/{d.get('api_name')}": d for d in self.config["dependencies"]}

    def page_values(self, api_name: str) -> list:
        """The values the page starts with, for each of the event's inputs (a state: null)."""
        return [self.components[i].get("props", {}).get("value") for i in self.events[api_name]["inputs"]]

    def send(self, api_name: str, data) -> dict:
        """The event's last message (its answer), or the HTTP refusal of the join."""
        session_hash = uuid.uuid4().hex[:11]
        body = {"data": data, "fn_index": self.events[api_name]["id"], "session_hash": session_hash}
        joined = self.http.post(f"{self.prefix}/queue/join", json=body)
        if joined.status_code != 200:
            return {"msg": "refused at the door", "status": joined.status_code}
        event_id = joined.json()["event_id"]
        with self.http.stream("GET", f"{self.prefix}/queue/data", params={"session_hash": session_hash}) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    message = json.loads(line[5:])
                    if message.get("event_id") == event_id and message["msg"] == "process_completed":
                        return message
                    if message["msg"] == "unexpected_error":
                        return message
        raise AssertionError(f"{api_name}: the event stream closed before its answer")


def malformed(values: list) -> list[list]:
    """Sixteen ways to get an event's inputs wrong, from its page values."""
    n = len(values)
    return [
        [], values[: n - 1], [None] * n, [{}] * n, [[1, 2]] * n, [HUGE] * n, [True] * n, [-1e308] * n,
        [2**70] * n, ["\x00"] * n, [[None]] * n, [{"name": "en-de-numbers"}, *values[1:]], [None, *values[1:]],
        [["en-de-numbers"], *values[1:]], ["../../etc/passwd", *values[1:]], [*values, "one too many"],
    ]  # fmt: skip


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    log = tmp_path_factory.mktemp("hostile-calls") / "app.log"
    with running_app(log, DECODER_EXPLORER_MODEL="en-de-numbers") as (url, _process):
        client = RawClient(url)
        yield client, log
        client.http.close()


def test_a_5_mb_dropdown_value_grows_the_log_by_at_most_2_kb_and_comes_back_cut(app):
    client, log = app
    values = client.page_values("/on_model_change")
    client.send("/on_model_change", values)  # the page's own first: what any event logs anyway
    before = log.stat().st_size
    answer = client.send("/on_model_change", ["Z" * 5_000_000, *values[1:]])
    grew = log.stat().st_size - before
    assert not answer["success"] and "is not in the list of choices" in answer["output"]["error"]
    assert len(answer["output"]["error"]) <= 300 and "…(5,000,000 characters) is not in" in answer["output"]["error"]
    assert grew <= 2048, grew
    said = log.read_text()[before:]
    assert "refused an input of on_model_change: Value: ZZZ" in said and "Traceback" not in said


def test_150_malformed_calls_leave_no_traceback_in_the_log(app):
    client, log = app
    before = log.stat().st_size
    answers = [client.send(name, data) for name in EVENTS for data in malformed(client.page_values(name))]
    assert len(answers) >= 150
    with open(log, "rb") as f:
        f.seek(before)
        said = f.read().decode("utf-8", "replace")
    assert not tracebacks(said), tracebacks(said)
    assert "Traceback" not in said and max(map(len, said.splitlines()), default=0) <= 1000
    assert said.count("didn't receive enough input values") == 0
    too_few = [line for line in said.splitlines() if "input values;" in line]
    assert too_few and all("refused an input of" in line for line in too_few)
    assert not any(a.get("msg") == "unexpected_error" for a in answers)
