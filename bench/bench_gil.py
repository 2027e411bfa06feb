"""What Python work beside the model costs a batched step, on a server whose threads share one GIL.

The thread that runs the model gives the GIL up inside every PyTorch call and must take it back
after each (~1,300 a pass of SmolLM2). A thread running Python meanwhile keeps it up to the
switch interval (5 ms by default), so the pass waits. Two tables:

1. a batched step of two SmolLM2 sessions, quiet and beside one thread that runs Python without
   pause, at three switch intervals (the worst case: a server's threads run in bursts);
2. what Gradio's queue spent after every event summing up its recorded events for its monitoring
   page (pandas), by how many events it had recorded: the app turns it off (app.calmer_queue).

    python bench/bench_gil.py [--steps 8]

Prints tables; not a test.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from explorer.batching import step_together
from explorer.session import GenerationSession
from explorer.ui import model_store
from tests.browser.load import DECODER

TEXT = "The history of the printing press begins in the fifteenth century when Johannes Gutenberg"


def median_ms(run, times: int) -> float:
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        run()
        spent.append(time.perf_counter() - start)
    return 1000 * statistics.median(spent)


def busy_python(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(i * i for i in range(2000))


def step_beside_python(steps: int) -> None:
    torch.set_num_threads(2)
    loaded = model_store.get_model(DECODER)
    sessions = [GenerationSession(loaded, f"{TEXT} {i}", use_cache=True) for i in range(2)]
    step_together(sessions)  # warm up
    print("A batched step of 2 SmolLM2 sessions (median ms)")
    print(f"{'beside':44} {'ms':>8}")
    print(f"{'nothing':44} {median_ms(lambda: step_together(sessions), steps):8.0f}")
    default = sys.getswitchinterval()
    for interval in (0.005, 0.001, 0.0002):
        sys.setswitchinterval(interval)
        stop = threading.Event()
        thread = threading.Thread(target=busy_python, args=(stop,))
        thread.start()
        try:
            ms = median_ms(lambda: step_together(sessions), steps)
        finally:
            stop.set()
            thread.join()
        print(f"{f'a Python thread, switch interval {interval * 1000:g} ms':44} {ms:8.0f}")
    sys.setswitchinterval(default)


def gradio_summary_cost() -> None:
    import gradio as gr
    from gradio.queueing import Queue

    with gr.Blocks() as demo:
        gr.Textbox()
    demo.queue()
    queue: Queue = demo._queue
    names = ["on_step", "on_reset", "on_sync", "on_load"]
    print("\nGradio's queue: its monitoring summary, built after every event (median ms)")
    print(f"{'events recorded':>16} {'ms':>8}")
    for count in (1_000, 3_000, 10_000):
        records = [
            {"time": time.time(), "status": "success", "process_time": random.random(),
             "function": random.choice(names), "session_hash": f"{i:010}"}
            for i in range(count)
        ]  # fmt: skip

        def summed(records=records) -> None:
            queue.event_count_at_last_cache, queue.events_recorded = 0, len(records)
            queue.compute_analytics_summary(records)

        print(f"{count:>16,} {median_ms(summed, 5):8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    step_beside_python(args.steps)
    gradio_summary_cost()


if __name__ == "__main__":
    main()
