"""A batched step of many sessions: its Python (PyTorch calls) and its time beside transformers'.

Three tables, SmolLM2-135M-Instruct, sessions of ~430 tokens (150 words "w12 w25 ...") whose texts differ,
2 threads:

1. PyTorch calls made from Python by one batched step of 1, 8 and 32 sessions (counted with a
   TorchFunctionMode: each call gives up the GIL and takes it back), and the calls each further
   session adds. Target: at most 60 a further session.
2. A batched step of 32 sessions against transformers' own batched decode of the same 32 texts
   (left-padded, cached, greedy; one new token per row), interleaved, medians: target <= 1.0x.
3. Followers' memory: the blocks of the model's stores (the cache, the kept queries and keys) held
   by a teacher's session alone, with 30 followers that fork it (as a workshop's followers in the
   teacher's process do), and with 30 that replay its tokens (as they did before): target <= 1.5x.

    python bench/bench_batch.py [--repeats 5] [--memory-only | --skip-memory]

Prints tables; not a test (compare ratios within one run, and say which CPU: `lscpu`).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch.overrides import TorchFunctionMode

import explorer
from explorer.batching import batched_step
from explorer.model.paged import BLOCK

SIZES = (1, 8, 32)


class CountCalls(TorchFunctionMode):
    """Counts the PyTorch functions and methods called from Python while it is on."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def texts(count: int, words: int = 150) -> list[str]:
    """``count`` texts of ``words`` words that differ (and differ in length, by a few tokens)."""
    return [" ".join(f"w{(s * 13 + i) % 89}" for i in range(words + s % 5)) for s in range(count)]


def step(sessions) -> None:
    batched_step(sessions) if len(sessions) > 1 else sessions[0].step()


def calls_table(loaded) -> None:
    print("\nPyTorch calls from Python in one batched step (SmolLM2, ~430-token sessions)")
    print(f"{'sessions':>8} {'calls':>8} {'per further session':>20}")
    one = None
    for size in SIZES:
        sessions = [explorer.GenerationSession(loaded, text) for text in texts(size)]
        step(sessions)  # warm up
        with CountCalls() as counted:
            step(sessions)
        one = counted.calls if one is None else one
        further = (counted.calls - one) / (size - 1) if size > 1 else float("nan")
        print(f"{size:>8} {counted.calls:>8,} {further:>20.0f}")


class HFBatch:
    """transformers' batched decode of the same texts: left-padded, cached, greedy."""

    def __init__(self, reference, tokenizer, batch_texts: list[str]) -> None:
        rows = [tokenizer(text)["input_ids"] for text in batch_texts]
        width = max(len(r) for r in rows)
        pad = reference.generation_config.pad_token_id
        self.ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])  # (B, T) left-padded
        self.mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])  # (B, T)
        self.model = reference
        with torch.inference_mode():
            out = reference(
                input_ids=self.ids, attention_mask=self.mask, position_ids=self._positions(), use_cache=True
            )
        self.cache, self.next = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)

    def _positions(self, last: int | None = None) -> torch.Tensor:
        positions = (self.mask.cumsum(-1) - 1).clamp(min=0)  # (B, T): each row's own positions
        return positions if last is None else positions[:, -last:]

    @torch.inference_mode()
    def step(self) -> None:
        self.mask = torch.cat([self.mask, torch.ones_like(self.next)], dim=1)
        out = self.model(
            input_ids=self.next, attention_mask=self.mask, position_ids=self._positions(1),
            past_key_values=self.cache, use_cache=True,
        )  # fmt: skip
        self.cache, self.next = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)


def timed_ms(run) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000


def against_transformers(loaded, repeats: int, size: int = 32) -> None:
    from transformers import AutoModelForCausalLM

    from explorer.loading.sources import smollm2_gguf_path

    path = smollm2_gguf_path()
    reference = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    reference.eval()
    reference.generation_config.pad_token_id = loaded.config.eos_token_id
    batch_texts = texts(size)
    sessions = [explorer.GenerationSession(loaded, text) for text in batch_texts]
    hf = HFBatch(reference, loaded.tokenizer, batch_texts)
    step(sessions), hf.step()  # warm up
    ours, passes, theirs = [], [], []
    for _ in range(repeats):  # interleaved: both see the same machine
        start = time.perf_counter()
        results = batched_step(sessions)
        ours.append((time.perf_counter() - start) * 1000)
        passes.append(results[0].elapsed_ms)  # the model's pass alone (every row records the batch's)
        theirs.append(timed_ms(hf.step))
    a, p, b = statistics.median(ours), statistics.median(passes), statistics.median(theirs)
    print(f"\nA batched step of {size} sessions (~430 tokens), medians of {repeats} interleaved")
    print(f"{'run':48} {'ms':>8} {'x transformers':>15}")
    print(f"{'ours, batched_step (the whole step)':48} {a:8.0f} {a / b:15.2f}")
    print(f"{'  of which the model pass':48} {p:8.0f} {p / b:15.2f}")
    print(f"{'transformers, batched decode (cached)':48} {b:8.0f} {1:15.2f}")
    print("(the whole step also chooses each row's token and finds its candidates and their texts,")
    print(" keeps the queries the heatmaps read, and records each row's step; transformers' decode")
    print(" takes the argmax of each row)")


def held_bytes(model) -> int:
    """Bytes of the blocks in use in the model's stores (the cache's and the kept queries' and keys')."""
    stores = (model.cache_store(), model.record_store(), model.record_key_store())
    return sum(store.used_blocks * store.bytes_per_position() * BLOCK for store in stores)


def followers_memory(loaded, followers: int = 30) -> None:
    print(f"\nA teacher's session (~430 tokens) and {followers} followers: blocks held in the model's stores")
    print(f"{'who holds what':>40} {'MB':>8} {'x teacher':>10}")
    gc.collect()
    baseline = held_bytes(loaded.model)
    teacher = explorer.GenerationSession(loaded, texts(1)[0])
    for _ in range(8):
        teacher.step()
    alone = held_bytes(loaded.model) - baseline
    rows = [("the teacher alone", alone)]
    forks = [teacher.fork() for _ in range(followers)]
    rows.append((f"+ {followers} forks (followers today)", held_bytes(loaded.model) - baseline))
    for _ in range(4):  # the teacher steps on; each follower takes a fork of the new state
        teacher.step()
        forks = [teacher.fork() for _ in range(followers)]
    gc.collect()
    rows.append(("+ the same after 4 more steps", held_bytes(loaded.model) - baseline))
    del forks
    replays = [teacher.started_again() for _ in range(followers)]
    for session in replays:
        session.replay(teacher.generated_ids)
    rows.append((f"+ {followers} replays (followers before)", held_bytes(loaded.model) - baseline))
    for name, held in rows:
        print(f"{name:>40} {held / 1e6:8.2f} {held / alone:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory-only", action="store_true", help="the followers' memory alone")
    parser.add_argument("--skip-memory", action="store_true", help="the calls and the time only")
    args = parser.parse_args()
    torch.set_num_threads(2)
    loaded = explorer.load_model("smollm2-135m-instruct", progress=False)
    if not args.skip_memory:
        followers_memory(loaded)
    if not args.memory_only:
        calls_table(loaded)
        against_transformers(loaded, args.repeats)


if __name__ == "__main__":
    main()
