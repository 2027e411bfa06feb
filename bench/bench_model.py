"""Milliseconds per generated token: ours (cache on/off, recording on/off) beside transformers.

SmolLM2-135M-Instruct (or Gemma 3 270M: ``--model gemma-3-270m``), a 64-token prompt, 64 new
tokens, greedy, 2 threads, everything measured in one run so that the ratios are fair on a
shared, noisy machine. Transformers reads the same GGUF.

    python bench/bench_model.py [--model smollm2-135m-instruct] [--new-tokens 64] [--repeats 1]

Prints tables; not a test. Targets: ours with the cache on and attention available (the
queries and keys every view computes attention from) costs at most 0.8x transformers' cached
generate (which records nothing); a 650-token prefill with attention available; the memory a
1,024-position session holds beyond the loaded model (target <= 0.5 GB). Also prints the floor
(the weight bytes a cached step reads over the streaming bandwidth measured in the same run)
and, per weight shape, one GEMV with each layout (see explorer/model/layout.py).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

PROMPT_TOKENS = 64


def _smollm2_gguf():
    from explorer.loading.sources import smollm2_gguf_path

    return smollm2_gguf_path()


def _gemma3_gguf():
    from explorer.loading.sources import gemma3_gguf_path

    return gemma3_gguf_path()


GGUF_OF = {"smollm2-135m-instruct": _smollm2_gguf, "gemma-3-270m": _gemma3_gguf}


def prompt_ids(tokenizer) -> list[int]:
    text = (
        "The history of the transformer begins in 2017, when a team at Google proposed an architecture "
        "built entirely on attention. Instead of reading a sentence one word at a time, the model lets "
        "every word look at every other word, and a decoder generates the output one token after another, "
        "each time reading what it has written so far."
    )
    ids = tokenizer(text)["input_ids"]
    assert len(ids) >= PROMPT_TOKENS, len(ids)
    return ids[:PROMPT_TOKENS]


def time_ours(loaded, ids, new_tokens, use_cache, record) -> float:
    import explorer

    text = loaded.tokenizer.decode(ids)
    session = explorer.GenerationSession(loaded, text, use_cache=use_cache, record_attention=record)
    start = time.perf_counter()
    for _ in range(new_tokens):
        if session.finished:
            session.undo()
        session.step()
    return (time.perf_counter() - start) * 1000 / new_tokens


def resident_mb() -> float:
    """This process's resident memory now (Linux), in MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def long_session(loaded, prompt_tokens: int = 650, positions: int = 1024) -> dict[str, float]:
    """The prefill of a long prompt, then a session grown to ``positions``: time and memory."""
    import explorer

    words = " ".join(f"word{i % 97} is number {i}." for i in range(prompt_tokens))
    ids = loaded.tokenizer(words)["input_ids"][:prompt_tokens]
    text = loaded.tokenizer.decode(ids)
    start = time.perf_counter()
    explorer.GenerationSession(loaded, text)
    prefill_s = time.perf_counter() - start
    gc.collect()
    before = resident_mb()  # the long session's own memory: the prefill's session is gone
    long_ids = loaded.tokenizer(words * 2)["input_ids"][: positions - 8]
    session = explorer.GenerationSession(loaded, loaded.tokenizer.decode(long_ids))
    while len(session.token_ids) < positions:
        if session.finished:
            session.undo()
        session.step()
    start = time.perf_counter()
    session.self_attention(loaded.config.n_layers - 1)  # one layer's (heads, T, T), as a view asks for it
    view_ms = (time.perf_counter() - start) * 1000
    kept = session.attention.self_inputs.nbytes
    return {"prefill_s": prefill_s, "view_ms": view_ms, "positions": len(session.token_ids),
            "cache_mb": session.cache_bytes / 2**20, "attention_inputs_mb": kept / 2**20,
            "resident_growth_mb": resident_mb() - before}  # fmt: skip


def weight_bytes_per_step(model) -> int:
    """Bytes of weights one cached decoder step reads: every linear layer and norm, once each
    (a tied token table counts once, as the output head). Token and position tables that are
    only looked up read a row per token, and the encoder does not run on a step: left out."""
    read: dict[int, torch.Tensor] = {}
    for name, module in model.named_modules():
        if name.startswith("encoder"):
            continue
        if isinstance(module, torch.nn.Embedding):
            continue
        for parameter in module.parameters(recurse=False):
            read[id(parameter)] = parameter
    return sum(p.nbytes for p in read.values())


def streaming_gb_per_s(mb: int = 1024) -> float:
    """Read bandwidth: summing a buffer far larger than every cache (best of five)."""
    buffer = torch.ones(mb * 2**20 // 4)
    buffer.sum()
    best = min(timed(buffer.sum) for _ in range(5))
    return buffer.nbytes / best / 1e9


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def layout_rows(model) -> list[tuple[str, int, float, float]]:
    """Per weight shape: how many, and one cached step's GEMV (us) with the weight stored
    (out, in) as nn.Linear does and stored (in, out); every matrix of the shape in turn, so
    that each is read from memory, not from a cache. Shows where explorer.model.layout's rule holds."""
    import torch.nn.functional as F

    by_shape: dict[tuple[int, int], list[torch.Tensor]] = {}
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            by_shape.setdefault(tuple(module.weight.shape), []).append(module.weight.detach())
    rows = []
    for (n_out, n_in), weights in sorted(by_shape.items(), key=lambda item: -item[0][0] * item[0][1]):
        x = torch.randn(1, 1, n_in)
        stored = {
            "(out, in)": [w.contiguous() for w in weights],
            "(in, out)": [w.t().contiguous().t() for w in weights],
        }
        us = {}
        for layout, matrices in stored.items():
            best = min(timed(lambda m=matrices, x=x: [F.linear(x, w) for w in m]) for _ in range(5))
            us[layout] = best / len(matrices) * 1e6
        rows.append((f"{n_out} x {n_in}", len(weights), us["(out, in)"], us["(in, out)"]))
    return rows


def time_transformers(model, ids, new_tokens, use_cache) -> float:
    input_ids = torch.tensor([ids])
    with torch.inference_mode():
        start = time.perf_counter()
        out = model.generate(
            input_ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, use_cache=use_cache
        )
        elapsed = time.perf_counter() - start
    assert out.shape[1] == len(ids) + new_tokens
    return elapsed * 1000 / new_tokens


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m-instruct", choices=sorted(GGUF_OF))
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; medians are printed")
    args = parser.parse_args()
    torch.set_num_threads(2)

    from transformers import AutoModelForCausalLM

    import explorer
    from explorer.loading import CACHE_ENV

    cache = tempfile.mkdtemp(prefix="bench-cache-")
    os.environ[CACHE_ENV] = cache
    t0 = time.perf_counter()
    explorer.load_model(args.model, progress=False)
    first_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    loaded = explorer.load_model(args.model, progress=False)
    cached_load = time.perf_counter() - t0
    path = GGUF_OF[args.model]()  # (Gemma's reassembled file lives in the cache: read it before it goes)
    reference = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    shutil.rmtree(cache, ignore_errors=True)
    reference.eval()
    reference.generation_config.pad_token_id = loaded.config.eos_token_id

    ids = prompt_ids(loaded.tokenizer)
    n = args.new_tokens
    rows = []
    for _ in range(args.repeats):
        rows.append(
            {
                "ours, cache on, attention available": time_ours(loaded, ids, n, True, True),
                "ours, cache on, recording nothing": time_ours(loaded, ids, n, True, False),
                "ours, cache off, attention available": time_ours(loaded, ids, n, False, True),
                "ours, cache off, recording nothing": time_ours(loaded, ids, n, False, False),
                "transformers generate, cache on": time_transformers(reference, ids, n, True),
                "transformers generate, cache off": time_transformers(reference, ids, n, False),
            }
        )
    medians = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    base = medians["transformers generate, cache on"]
    print(f"\n{args.model}, {PROMPT_TOKENS}-token prompt, {n} new tokens, greedy, 2 threads, fp32")
    print(f"{'run':40s} {'ms/token':>9s} {'x HF cached':>12s}")
    for name, ms in medians.items():
        print(f"{name:40s} {ms:9.1f} {ms / base:12.2f}")
    bandwidth = streaming_gb_per_s()
    step_bytes = weight_bytes_per_step(loaded.model)
    floor_ms = step_bytes / (bandwidth * 1e9) * 1000
    ours = medians["ours, cache on, attention available"]
    print(
        f"\nfloor: a cached step reads {step_bytes / 2**20:.0f} MB of weights; at the streaming bandwidth measured "
        f"now ({bandwidth:.1f} GB/s, a sum over 1 GB) that takes {floor_ms:.1f} ms; "
        f"ours is {ours / floor_ms:.1f}x the floor"
    )
    print(f"\n{'weight shape (out x in)':24s} {'count':>5s} {'us, (out, in)':>14s} {'us, (in, out)':>14s}  stored as")
    from explorer.model.layout import prefers_column_major

    for shape, count, row_major, column_major in layout_rows(loaded.model):
        n_out, n_in = (int(v) for v in shape.split(" x "))
        chosen = "(in, out)" if prefers_column_major(torch.empty(n_out, n_in, device="meta")) else "(out, in)"
        print(f"{shape:24s} {count:5d} {row_major:14.0f} {column_major:14.0f}  {chosen}")
    long = long_session(loaded)
    print(f"\n650-token prompt, prefill with attention available: {long['prefill_s']:.2f} s")
    print(
        f"a {long['positions']}-position session: KV cache {long['cache_mb']:.0f} MB, queries and keys kept for "
        f"attention {long['attention_inputs_mb']:.0f} MB; resident memory grew {long['resident_growth_mb']:.0f} MB "
        f"(target <= 512); one layer's attention computed for a view in {long['view_ms']:.0f} ms"
    )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nload, first (GGUF conversion): {first_load:6.1f} s")
    print(f"load, from the safetensors cache: {cached_load:6.1f} s")
    print(f"peak resident memory of this process: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
