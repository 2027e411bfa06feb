"""Two real decoders in one process: the resident memory of SmolLM2, of Gemma 3 270M, of both, and
of one after the other is unloaded; each one's load time from the converted cache.

Each case runs in a fresh Python process (a process's resident size only grows back so far once
freed), loads through the server's model store (``explorer.present.model_store``, the page's own
way), steps a session of 32 tokens on each model it holds, and reports its resident memory. A
Space has 16 GB; the target is both models at once well inside it.

    python bench/bench_two_models.py

Prints a table; not a test. Needs the converted caches (one start of each model converts it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMOLLM2, GEMMA = "smollm2-135m-instruct", "gemma-3-270m"
CASES = {
    "nothing loaded (the server's imports)": [],
    "SmolLM2-135M": [SMOLLM2],
    "Gemma 3 270M": [GEMMA],
    "both": [SMOLLM2, GEMMA],
    "both, then Gemma unloaded": [SMOLLM2, GEMMA, f"-{GEMMA}"],
}


def resident_mb() -> float:
    import os

    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def stepped_session(name: str, steps: int = 32):
    """A session of ``steps`` greedy tokens on a loaded model (no reference to it left here)."""
    import explorer
    from explorer.present import model_store

    session = explorer.GenerationSession(model_store.get_model(name), "The history of the transformer begins in")
    for _ in range(steps):
        session.step()
    return session


def child(plan: list[str]) -> dict:
    """Run in a fresh process: load (or unload, "-name") each model of ``plan`` in turn."""
    sys.path.insert(0, str(ROOT))
    import torch

    torch.set_num_threads(2)
    from explorer.native_memory import return_free_memory
    from explorer.present import model_store

    loads, sessions = {}, {}
    for entry in plan:
        if entry.startswith("-"):
            sessions.pop(entry[1:], None)
            model_store.unload_model(entry[1:])
            continue
        start = time.perf_counter()
        model_store.get_model(entry, progress=False)
        loads[entry] = time.perf_counter() - start
        sessions[entry] = stepped_session(entry)
    return_free_memory()
    return {"resident_mb": resident_mb(), "loads_s": loads}


def measure(plan: list[str]) -> dict:
    code = f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from bench.bench_two_models import child; "
    code += f"print(json.dumps(child({plan!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    rows = {name: measure(plan) for name, plan in CASES.items()}
    base = rows["nothing loaded (the server's imports)"]["resident_mb"]
    print(
        f"\n{'case (a fresh process each; 32 steps on each model held)':58s} {'resident MB':>12s} {'over imports':>13s}"
    )
    for name, row in rows.items():
        print(f"{name:58s} {row['resident_mb']:12.0f} {row['resident_mb'] - base:13.0f}")
    print(f"\n{'load from the converted cache':30s} {'s':>6s}")
    for name in (SMOLLM2, GEMMA):
        print(f"{name:30s} {rows['both']['loads_s'][name]:6.1f}")


if __name__ == "__main__":
    main()
