"""Many users stepping at once, through the app's own endpoints (page_client.PageClient, at a
browser's cost, or gradio_client).

Each simulated user is one Gradio session (its own ``gr.State``): it loads a model with a
prompt of its own, steps, and checks after every step that the token strip it got back starts
with its own prompt and has grown by exactly one token. Used by a test (a few users) and by
``bench/bench_load.py`` (twenty).
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from dataclasses import dataclass, field

from tests.browser.page_client import PageClient, skipped

DECODER = "smollm2-135m-instruct"
TRANSLATOR = "en-de-numbers"
SETTINGS = [False, True, 0.0, 0, 1.0, 0]  # chat, KV cache, temperature, top-k, top-p, seed


@dataclass(frozen=True)
class ClassPlan:
    """How a simulated class behaves: the share of users on the translator (the rest on SmolLM2),
    the seconds each thinks between two clicks (none: clicking without pause), and how long a
    decoder prompt is (a padding of this many words before the question)."""

    translator_every: int = 2  # user u is on the translator when u % translator_every == translator_every - 1
    think_s: tuple[float, float] | None = None
    prompt_words: int = 0
    client: str = "page"  # "page": PageClient, a browser's cost; "gradio_client": the API's own client


def user_input(user: int, plan: ClassPlan = ClassPlan()) -> tuple[str, str]:
    """(model, text): each user's own decoder prompt or translator source."""
    if user % plan.translator_every == plan.translator_every - 1:
        return TRANSLATOR, f"Wednesday, March {user % 28 + 1}, 20{user + 10}"
    padding = " ".join(f"word{(user * 7 + i) % 97}" for i in range(plan.prompt_words))
    return DECODER, f"{padding} User {user} asks: what is {user} times {user + 1}? The answer is".strip()


def strip_items(value) -> list[dict]:
    """The token strip (HighlightedText) as a list of {"token", "class_or_confidence"}."""
    if isinstance(value, dict):
        if "value" not in value:
            raise RuntimeError(f"the step changed no token strip (a warning was shown?): {value}")
        value = value["value"]
    return [item if isinstance(item, dict) else {"token": item[0]} for item in value or []]


def strip_text(value) -> str:
    """The token strip as one string."""
    return "".join(item.get("token", "") for item in strip_items(value))


@dataclass
class UserRun:
    user: int
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    crosstalk: list[str] = field(default_factory=list)


def run_user(
    url: str, user: int, steps: int, start: threading.Barrier | None = None, plan: ClassPlan = ClassPlan()
) -> UserRun:
    run = UserRun(user)
    model, text = user_input(user, plan)
    thinking = random.Random(user)
    try:
        client = connect(url, plan.client)
        loaded = client.predict(model, text, *SETTINGS, None, api_name="/on_load")  # None: no kept session
        strip = outputs_by_label(client, "/on_load", loaded)["strip"]
        own = strip_text(strip)
        if start is not None:
            start.wait()
        count = None
        for _ in range(steps):
            if plan.think_s is not None:
                time.sleep(thinking.uniform(*plan.think_s))
            begin = time.perf_counter()
            result = client.predict(text, *SETTINGS, api_name="/on_step")
            run.latencies_ms.append((time.perf_counter() - begin) * 1000)
            shown = strip_items(outputs_by_label(client, "/on_step", result)["strip"])
            if not strip_text(shown).startswith(own):
                run.crosstalk.append(f"user {user} saw {strip_text(shown)[:60]!r}")
            if count is not None and len(shown) != count + 1:
                run.crosstalk.append(f"user {user}: {count} tokens became {len(shown)}")
            count = len(shown)
            if shown and shown[-1].get("token") in ("</s>", "<|im_end|>", "<|endoftext|>"):
                client.predict(text, *SETTINGS, api_name="/on_reset")  # the text ended: start it again
                count = None
    except Exception as error:  # counted, not raised: the report says how many failed
        run.errors.append(f"user {user}: {type(error).__name__}: {error}")
    return run


def connect(url: str, kind: str):
    """A client for one simulated user: see page_client.py for why the default is not gradio_client."""
    if kind == "gradio_client":
        from gradio_client import Client

        return Client(url, verbose=False, download_files=False)
    return PageClient(url)


_OUTPUT_NAMES: dict[str, list[str]] = {}


def outputs_by_label(client, api_name: str, values) -> dict:
    """The page event's outputs by component label (the strip is the one labelled "Tokens ...").

    Read from the app's config: the page's events are not on the API page (explorer/ui/api.py),
    and a client gets every output but those it skips (``page_client.skipped``: gr.State, layout blocks)."""
    if api_name not in _OUTPUT_NAMES:
        components = {c["id"]: c for c in client.config["components"]}
        event = next(d for d in client.config["dependencies"] if "/" + str(d.get("api_name")) == api_name)
        outputs = [components[i] for i in event["outputs"] if not skipped(components[i])]
        labels = [c["props"].get("label") or f"component {c['id']}" for c in outputs]
        _OUTPUT_NAMES[api_name] = ["strip" if label.startswith("Tokens") else label for label in labels]
    return dict(zip(_OUTPUT_NAMES[api_name], values, strict=True))


@dataclass
class LoadReport:
    users: int
    steps: int
    runs: list[UserRun]
    seconds: float

    @property
    def latencies(self) -> list[float]:
        return [ms for run in self.runs for ms in run.latencies_ms]

    @property
    def errors(self) -> list[str]:
        return [e for run in self.runs for e in run.errors]

    @property
    def crosstalk(self) -> list[str]:
        return [c for run in self.runs for c in run.crosstalk]

    def percentile(self, q: float) -> float:
        values = sorted(self.latencies)
        return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")

    @property
    def median(self) -> float:
        return statistics.median(self.latencies) if self.latencies else float("nan")


def simulate_users(url: str, users: int, steps: int, plan: ClassPlan = ClassPlan()) -> LoadReport:
    """``users`` sessions load at once, then all step ``steps`` times together (each thinking
    between clicks as ``plan`` says)."""
    runs: list[UserRun] = [UserRun(u) for u in range(users)]
    start = threading.Barrier(users, timeout=600)

    def work(u: int) -> None:
        runs[u] = run_user(url, u, steps, start, plan)

    begin = time.perf_counter()
    threads = [threading.Thread(target=work, args=(u,)) for u in range(users)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return LoadReport(users, steps, runs, time.perf_counter() - begin)
