"""In-browser latency from clicking "Step" to the updated heatmap, beside the model's own step time.

Starts the app, opens it in Debian's Chromium, types a prompt of about 64 SmolLM2 tokens and
clicks Step 20 times. Prints a table; not a test (machines are shared and noisy).

    python bench/bench_ui.py [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
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


# In the page: when Step was clicked, and when plotly began and finished redrawing the heatmap.
PROBES = """() => {
    window.probe = {click: 0, reactStart: 0, reactEnd: 0, changed: {}};
    document.querySelector('#step').addEventListener('click', () => {
        window.probe.click = performance.now();
        window.probe.changed = {};
    }, true);
    const react = window.Plotly.react;
    window.Plotly.react = function (gd, ...rest) {
        const mine = gd.closest('#self-attention');
        if (mine) window.probe.reactStart = performance.now();
        const done = react.call(this, gd, ...rest);
        if (mine) Promise.resolve(done).then(() => { window.probe.reactEnd = performance.now(); });
        return done;
    };
    // When each view's DOM first changed after the click: the order in which the page updates.
    for (const id of WATCHED) {
        const node = document.getElementById(id);
        new MutationObserver(() => {
            if (!(id in window.probe.changed)) window.probe.changed[id] = performance.now() - window.probe.click;
        }).observe(node, {childList: true, subtree: true, characterData: true});
    }
}""".replace("WATCHED", '["status", "token-strip", "candidates", "self-attention", "all-heads"]')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False")
    server = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
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
            page.locator("#prompt textarea").fill(PROMPT)
            page.click("#step")
            page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
            page.wait_for_function("() => window.Plotly && window.Plotly.react")
            page.evaluate(PROBES)
            latencies, model_ms, to_react, react_ms = [], [], [], []
            first_change: dict[str, list[float]] = {}
            for _ in range(args.steps):
                rows = page.evaluate("() => document.querySelectorAll('#token-strip .token').length")
                start = time.perf_counter()
                page.click("#step")
                page.wait_for_function(
                    """n => { const g = document.querySelector('#self-attention .js-plotly-plot');
                        const z = g && g.data && g.data[0].z;
                        return z && Number(String(z.shape || z.length).split(',')[0]) === n; }""",
                    arg=rows + 1,
                    polling="raf",
                )
                latencies.append((time.perf_counter() - start) * 1000)
                page.wait_for_function("() => window.probe.reactEnd > window.probe.click")
                probe = page.evaluate("() => window.probe")
                to_react.append(probe["reactStart"] - probe["click"])
                react_ms.append(probe["reactEnd"] - probe["reactStart"])
                for view, ms in probe["changed"].items():
                    first_change.setdefault(view, []).append(ms)
                found = re.search(r"last step (\d+) ms", page.inner_text("#status"))
                model_ms.append(float(found.group(1)) if found else float("nan"))
                page.wait_for_function("() => !document.querySelector('.generating, .pending')")
            tokens = page.evaluate("() => document.querySelectorAll('#token-strip .token').length")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    print(f"\nStep -> updated heatmap in Chromium, SmolLM2, {tokens - args.steps}..{tokens} tokens, {args.steps} steps")
    print(f"{'measure':42s} {'median ms':>10s} {'p90 ms':>8s}")
    for name, values in (
        ("click to updated heatmap (browser)", latencies),
        ("  click to Plotly.react (server, transport)", to_react),
        ("  Plotly.react of the heatmap", react_ms),
        ("model step (server, cache on)", model_ms),
        *((f"  first change of #{view}", values) for view, values in sorted(first_change.items())),
    ):
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        print(f"{name:42s} {statistics.median(values):10.0f} {p90:8.0f}")
    print("target: browser median <= 400 ms")


if __name__ == "__main__":
    main()
