"""A simulated user that speaks to the app as its page does, at a browser's cost.

gradio_client opens a new HTTP client (and TLS context) for every call and a thread per event
stream: ~65 ms of CPU per Step on this project's machines, as much as the server's own work. In a
class each student's browser runs on their own machine; simulating thirty of them on the
server's two cores with gradio_client measures the students as much as the server. This client
keeps one connection per user and speaks Gradio's queue protocol (sse_v3) directly: it joins the
queue with the event's inputs and reads the session's event stream until its event completes.

It returns the same values gradio_client does with ``download_files=False`` (the outputs a client
sees: no gr.State, no layout blocks), so ``load.py`` reads both the same way.
"""

from __future__ import annotations

import json
import uuid

import httpx
from gradio_client.utils import SKIP_COMPONENTS


def skipped(component: dict) -> bool:
    """Whether a client leaves this output out (gr.State, layout blocks), by gradio_client's own rule."""
    return component.get("skip_api", component["type"] in SKIP_COMPONENTS)


class PageClient:
    def __init__(self, url: str):
        self.http = httpx.Client(base_url=url, timeout=httpx.Timeout(600.0))
        self.config = self.http.get("/config").json()
        self.prefix = self.config.get("api_prefix", "/gradio_api")
        self.session_hash = uuid.uuid4().hex[:11]
        self.components = {c["id"]: c for c in self.config["components"]}
        self.answer_bytes = 0  # the size of the last completed event's message (bench/bench_stranger.py)

    def predict(self, *data, api_name: str):
        """Run the page event ``api_name`` ("/on_step") with ``data`` (every input but gr.State,
        as gradio_client takes them); returns the outputs gradio_client would."""
        index, event = self.event(api_name)
        inputs = iter(data)
        full = [None if self.components[i]["type"] == "state" else next(inputs) for i in event["inputs"]]
        joined = self.http.post(
            f"{self.prefix}/queue/join",
            json={"data": full, "fn_index": index, "session_hash": self.session_hash, "trigger_id": None},
        )
        if joined.status_code == 503:
            raise RuntimeError("Queue is full")
        joined.raise_for_status()
        event_id = joined.json()["event_id"]
        completed = self.wait_for(event_id)
        if not completed.get("success"):
            raise RuntimeError(f"{api_name} failed: {completed.get('output')}")
        values = completed["output"]["data"]
        return tuple(v for i, v in zip(event["outputs"], values, strict=True) if not skipped(self.components[i]))

    def wait_for(self, event_id: str) -> dict:
        """Read this session's event stream until ``event_id`` completes; its last message."""
        with self.http.stream("GET", f"{self.prefix}/queue/data", params={"session_hash": self.session_hash}) as s:
            for line in s.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("event_id") == event_id and message["msg"] == "process_completed":
                    self.answer_bytes = len(line)
                    return message
                if message["msg"] == "unexpected_error":
                    raise RuntimeError(message.get("message"))
        raise RuntimeError(f"the event stream closed before event {event_id} completed")

    def event(self, api_name: str) -> tuple[int, dict]:
        for index, dependency in enumerate(self.config["dependencies"]):
            if "/" + str(dependency.get("api_name")) == api_name:
                return dependency.get("id", index), dependency
        raise KeyError(api_name)

    def close(self) -> None:
        self.http.close()
