"""In-browser latency from clicking "Step" to the updated heatmap, beside the model's own step time.

Starts the app, opens it in Debian's Chromium and, for a prompt of about 60 and one of about 700
SmolLM2 tokens, times the first Step (the prefill, until the heatmap is drawn) and then clicks
Step 20 times. Prints a table per length; not a test (machines are shared and noisy).

The latency is measured in the page: from the click event to the first frame after the heatmap
has been redrawn. What Playwright sees (its click(), which first checks that the button is
visible and still, and its polling) adds tens of milliseconds and has a row of its own.

    python bench/bench_ui.py [--steps 20]

Targets (issue 11): the UI's share (click to heatmap minus the model's step) <= 150 ms at ~60
tokens and <= 400 ms at ~700; the first Step of a 650-token prompt <= 4 s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS  # noqa: E402

PROMPT = (
    "The history of the transformer begins in 2017, when a team proposed an architecture built entirely on "
    "attention. Instead of reading a sentence one word at a time, the model lets every word look at every "
    "other word, and a decoder generates the output one token"
)


# In the page: when Step was clicked, when the heatmap (explorer/ui/heatmap.js) began and
# finished drawing, and the next frame after that (the new row on screen).
PROBES = """() => {
    window.probe = {click: 0, drawStart: 0, drawEnd: 0, painted: 0, changed: {}};
    document.querySelector('#step').addEventListener('click', () => {
        window.probe.click = performance.now();
        window.probe.changed = {};
    }, true);
    document.querySelector('#self-attention .attention-figure').addEventListener('drawn', event => {
        window.probe.drawStart = event.detail.started;
        window.probe.drawEnd = performance.now();
        requestAnimationFrame(() => { window.probe.painted = performance.now(); });
    });
    // When each view's DOM first changed after the click: the order in which the page updates.
    for (const id of WATCHED) {
        const node = document.getElementById(id);
        new MutationObserver(() => {
            if (!(id in window.probe.changed)) window.probe.changed[id] = performance.now() - window.probe.click;
        }).observe(node, {childList: true, subtree: true, characterData: true});
    }
}""".replace("WATCHED", '["status", "token-strip", "candidates", "self-attention", "all-heads"]')


LONG_PROMPT = "Count with me: " + " ".join(f"{i} apples," for i in range(1, 127))  # about 650 tokens

# The heatmap shows the newest token's row (the last row of its window): the step has been drawn.
NEWEST_ROW_DRAWN = """n => { const g = document.querySelector('#self-attention .attention-figure');
    const y = g && g.data && g.data[0].y;
    return y && y.length && String(y[y.length - 1]).startsWith(`${n - 1} `); }"""


def token_count(page) -> int:
    return page.evaluate("() => document.querySelectorAll('#token-strip .token').length")


def first_step_seconds(page, prompt: str) -> float:
    """Type a new prompt and click Step: until its heatmap shows the new token."""
    page.locator("#prompt textarea").fill(prompt)
    start = time.perf_counter()
    page.click("#step")
    # "(1 generated)": the new session's first step ("21 generated" of the last one must not match).
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('(1 generated)')")
    page.wait_for_function(NEWEST_ROW_DRAWN, arg=token_count(page), polling=100)
    return time.perf_counter() - start


def gradio_traces(url: str, steps: int) -> list[dict]:
    """Gradio's own per-event timings (the app runs with GRADIO_PROFILING=1): the last ``steps`` Steps."""
    with urllib.request.urlopen(f"{url}/gradio_api/profiling/traces") as response:
        traces = json.load(response)
    return [t for t in traces if t["fn_name"] == "on_step"][-steps:]


class ServerLog:
    """The app's log (run with $DECODER_EXPLORER_PROFILE): how long each callback took."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def callback_ms(self, name: str) -> float:
        """The last ``name`` callback logged since the previous call."""
        with open(self.path) as f:
            f.seek(self.offset)
            text = f.read()
            self.offset = f.tell()
        found = re.findall(rf"profile {name} ([\d.]+) ms", text)
        return float(found[-1]) if found else float("nan")


def measure_steps(page, steps: int, server_log: ServerLog, url: str) -> dict[str, list[float]]:
    latencies, seen_ms, model_ms, to_draw, draw_ms, callback_ms = [], [], [], [], [], []
    first_change: dict[str, list[float]] = {}
    for _ in range(steps):
        rows = token_count(page)
        server_log.callback_ms("on_step")  # skip what came before this click
        start = time.perf_counter()
        page.click("#step")
        page.wait_for_function(NEWEST_ROW_DRAWN, arg=rows + 1, polling=20)
        seen_ms.append((time.perf_counter() - start) * 1000)
        page.wait_for_function("() => window.probe.painted > window.probe.drawEnd")
        probe = page.evaluate("() => window.probe")
        latencies.append(probe["painted"] - probe["click"])
        to_draw.append(probe["drawStart"] - probe["click"])
        draw_ms.append(probe["drawEnd"] - probe["drawStart"])
        for view, ms in probe["changed"].items():
            first_change.setdefault(view, []).append(ms)
        found = re.search(r"last step (\d+) ms", page.inner_text("#status"))
        model_ms.append(float(found.group(1)) if found else float("nan"))
        page.wait_for_function("() => !document.querySelector('.generating, .pending')")
        callback_ms.append(server_log.callback_ms("on_step"))
    ui_share = [total - model for total, model in zip(latencies, model_ms, strict=True)]
    views_ms = [callback - model for callback, model in zip(callback_ms, model_ms, strict=True)]
    traces = gradio_traces(url, steps)
    phases = ("queue_wait", "preprocess", "postprocess", "postprocess_save_pil_to_cache",
              "postprocess_update_state_in_config", "postprocess_move_to_cache")  # fmt: skip
    phase = {name: [t[f"{name}_ms"] for t in traces] for name in phases}
    on_server = [t["total_ms"] for t in traces]
    rest = [draw - server for draw, server in zip(to_draw, on_server, strict=True)]
    return {
        "click to updated heatmap on screen (in the page)": latencies,
        "  click to the heatmap's redraw": to_draw,
        "    server, all of Gradio's event": on_server,
        "      queue wait": phase["queue_wait"],
        "      preprocess": phase["preprocess"],
        "      the step callback": callback_ms,
        "        of which the model step": model_ms,
        "        of which building the views": views_ms,
        "      postprocess": phase["postprocess"],
        "        the all-heads image to PNG": phase["postprocess_save_pil_to_cache"],
        "        state kept in the page's config": phase["postprocess_update_state_in_config"],
        "        files moved to Gradio's cache": phase["postprocess_move_to_cache"],
        "    transport, and the page until the redraw": rest,
        "  the heatmap's redraw (explorer/ui/heatmap.js)": draw_ms,
        "model step (server, cache on)": model_ms,
        "the UI's share (click to heatmap - model step)": ui_share,
        **{f"  first change of #{view}": values for view, values in sorted(first_change.items())},
        "Playwright's click() to its poll seeing the row": seen_ms,
    }


def print_table(title: str, rows: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    print(f"{'measure':48s} {'median ms':>10s} {'p90 ms':>8s}")
    for name, values in rows.items():
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        print(f"{name:48s} {statistics.median(values):10.0f} {p90:8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False",
               DECODER_EXPLORER_PROFILE="1", GRADIO_PROFILING="1")  # fmt: skip
    log_path = Path(tempfile.mkdtemp(prefix="bench-ui-")) / "server.log"
    with open(log_path, "w") as log_file:
        server = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log_file,
                                  stderr=subprocess.STDOUT)  # fmt: skip
    server_log = ServerLog(log_path)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(360):
            try:
                urllib.request.urlopen(url, timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(180_000)
            page.goto(url)
            page.wait_for_selector("#token-strip .token")
            page.wait_for_function("() => document.querySelector('#self-attention .attention-figure').data")
            page.evaluate(PROBES)
            tables = {}
            for label, prompt in (("~60", PROMPT), ("~650", LONG_PROMPT)):
                prefill_s = first_step_seconds(page, prompt)
                n = token_count(page)
                rows = measure_steps(page, args.steps, server_log, url)
                tables[label] = (n, prefill_s, rows)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    for label, (n, prefill_s, rows) in tables.items():
        print_table(f"Step -> updated heatmap in Chromium, SmolLM2, {label} tokens ({n}..{n + args.steps}), "
                    f"{args.steps} steps; first Step (prefill to heatmap) {prefill_s:.1f} s", rows)  # fmt: skip
    print("\ntargets: the UI's share <= 150 ms at ~60 tokens, <= 400 ms at ~700; first Step of ~650 tokens <= 4 s")


if __name__ == "__main__":
    main()
