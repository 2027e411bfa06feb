"""What Python work beside the model costs a batched step, on a server whose threads share one GIL.

The thread that runs the model gives the GIL up inside most of its PyTorch calls and must take it
back after each. A thread running Python meanwhile keeps it up to the switch interval (5 ms by
default), so the pass waits. Four tables:

0. a batched step by its size, quiet: its PyTorch calls (counted with a TorchFunctionMode), its time;
1. a batched step of two SmolLM2 sessions, quiet and beside one thread that runs Python without
   pause, at three switch intervals (the worst case: a server's threads run in bursts);
2. a prefill (a Reset) and a batched step at once, in two threads, against one after the other:
   whether running Resets through the step batcher, never beside a pass, would save time;
3. what Gradio's queue spent after every event summing up its recorded events for its monitoring
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
from bench_batch import CountCalls  # bench/ is on the path: this file's folder

from explorer.batching import step_together
from explorer.present import model_store
from explorer.session import GenerationSession
from tests.browser.load import DECODER

TEXT = "The history of the printing press begins in the fifteenth century when Johannes Gutenberg"


def sessions_of(loaded, count: int) -> list[GenerationSession]:
    """``count`` cached sessions on texts that differ in their last word."""
    return [GenerationSession(loaded, f"{TEXT} {i}", use_cache=True) for i in range(count)]


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


def calls_by_batch_size(loaded, steps: int) -> None:
    print("A batched step, quiet: PyTorch calls made from Python, and median ms")
    print(f"{'sessions':>8} {'calls':>8} {'ms':>8} {'ms/session':>11}")
    for size in (1, 2, 4):
        sessions = sessions_of(loaded, size)
        step_together(sessions)
        with CountCalls() as counted:
            step_together(sessions)
        ms = median_ms(lambda sessions=sessions: step_together(sessions), steps)
        print(f"{size:>8} {counted.calls:>8,} {ms:8.0f} {ms / size:11.0f}")


def step_beside_python(loaded, steps: int) -> None:
    sessions = sessions_of(loaded, 2)
    step_together(sessions)  # warm up
    print("\nA batched step of 2 SmolLM2 sessions (median ms)")
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


def prefill_beside_step(loaded, steps: int) -> None:
    sessions = sessions_of(loaded, 4)

    def prefill() -> None:
        GenerationSession(loaded, TEXT, use_cache=True)

    def both_at_once() -> None:
        thread = threading.Thread(target=prefill)
        thread.start()
        step_together(sessions)
        thread.join()

    alone = {"a prefill (~20 tokens)": prefill, "a batched step of 4 sessions": lambda: step_together(sessions)}
    spent = {name: median_ms(run, steps) for name, run in alone.items()}
    print("\nA Reset's prefill and a batched step (median ms)")
    for name, ms in spent.items():
        print(f"{name:44} {ms:8.0f}")
    print(f"{'one after the other (the sum)':44} {sum(spent.values()):8.0f}")
    print(f"{'both at once, in two threads':44} {median_ms(both_at_once, steps):8.0f}")


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
    torch.set_num_threads(2)
    loaded = model_store.get_model(DECODER)
    calls_by_batch_size(loaded, args.steps)
    step_beside_python(loaded, args.steps)
    prefill_beside_step(loaded, args.steps)
    gradio_summary_cost()


if __name__ == "__main__":
    main()
