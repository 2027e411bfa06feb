"""Issue 58's unload-and-reload cycle, in the server's model store: a tab holds a session on a
model, another tab unloads that model ("Unload the second model"), a third tab loads it again.
Before the store owned its models, each cycle left one more copy alive (~600 MB for SmolLM2).

Each run is a fresh Python process importing ``explorer`` from ``--code`` (this checkout by
default; another checkout's root for a before/after), with 4 cycles on SmolLM2; it prints the
resident memory and the live copies of the model after each cycle.

    python bench/bench_model_store.py                     # this checkout
    python bench/bench_model_store.py --code /work/main   # another one, for the "before"

Prints a table; not a test (tests/test_model_store.py checks the copies). Needs SmolLM2's
converted cache (one start of the app converts it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m-instruct"
CYCLES = 4


def resident_mb() -> float:
    import os

    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(cycles: int) -> list[dict]:
    """Run in the fresh process: the cycles, measured after each."""
    import gc

    import torch

    torch.set_num_threads(2)
    import explorer
    from explorer.loading import LoadedModel
    from explorer.native_memory import return_free_memory
    from explorer.present import model_store

    def measured(cycle: int) -> dict:
        gc.collect()
        return_free_memory()
        copies = sum(1 for o in gc.get_objects() if type(o) is LoadedModel and o.name == MODEL)
        return {"cycle": cycle, "resident_mb": resident_mb(), "copies": copies}

    tabs = [explorer.GenerationSession(model_store.get_model(MODEL, progress=False), "The history of")]
    rows = [measured(0)]
    for cycle in range(1, cycles + 1):
        model_store.unload_model(MODEL)  # another tab's Unload
        tabs.append(explorer.GenerationSession(model_store.get_model(MODEL, progress=False), "The history of"))
        rows.append(measured(cycle))
    return rows


def measure(code: Path, cycles: int) -> list[dict]:
    script = f"import json, runpy, sys; sys.path.insert(0, {str(code)!r}); "  # that checkout's explorer
    script += f"child = runpy.run_path({__file__!r})['child']; print(json.dumps(child({cycles})))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=code)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--code", type=Path, default=ROOT, help="the checkout whose explorer is measured")
    p.add_argument("--cycles", type=int, default=CYCLES)
    args = p.parse_args()
    rows = measure(args.code.resolve(), args.cycles)
    print(f"\n{MODEL}: unload-and-reload cycles, explorer from {args.code}")
    print(f"{'cycle':>6s} {'resident MB':>12s} {'growth MB':>10s} {'live copies':>12s}")
    for row in rows:
        growth = row["resident_mb"] - rows[0]["resident_mb"]
        print(f"{row['cycle']:6d} {row['resident_mb']:12.0f} {round(growth):10d} {row['copies']:12d}")


if __name__ == "__main__":
    main()
