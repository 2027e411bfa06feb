"""glibc's free memory handed back to the system (explorer/native_memory.py, issue 12)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from explorer import native_memory

pytestmark = pytest.mark.skipif(native_memory.glibc() is None, reason="glibc only")


def resident_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_free_blocks_inside_the_heap_go_back_to_the_system():
    """Blocks freed between blocks still held stay resident until malloc_trim(0) releases them."""
    native_memory.return_free_memory()
    blocks = [bytearray(64 * 1024) for _ in range(3000)]  # ~190 MB, written (resident), below mmap's threshold
    held = blocks[::20]  # one block in twenty stays: the heap's top cannot shrink past it
    del blocks
    before = resident_mb()
    took = native_memory.return_free_memory()
    after = resident_mb()
    assert before - after > 100, (before, after)
    assert took >= 0 and len(held) == 150


def test_the_server_keeps_returning_free_memory_in_a_daemon_thread():
    returner = native_memory.keep_returning_free_memory(every_s=0.01)
    try:
        assert returner is not None and returner.daemon
        deadline = time.monotonic() + 10
        while returner.returns < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert returner.returns >= 3
    finally:
        returner.stop()
        returner.join(timeout=5)
    assert not returner.is_alive()


def test_the_server_starts_one_returner_however_many_apps_it_starts(monkeypatch):
    monkeypatch.setattr(native_memory, "_server_returner", None)
    monkeypatch.setenv(native_memory.TRIM_ENV, "3600")
    native_memory.serve_memory_back()
    first = native_memory._server_returner
    native_memory.serve_memory_back()
    assert first is not None and native_memory._server_returner is first and first.every_s == 3600
    first.stop()


def test_no_trim_starts_while_a_step_runs():
    """issue 58: malloc_trim holds each arena's lock while it walks it; a step waits meanwhile."""
    returner = native_memory.FreeMemoryReturner(every_s=0.01)
    with native_memory.hot_path():  # as the step batcher holds it during a pass
        returner.start()
        deadline = time.monotonic() + 10
        while returner.skipped < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert returner.returns == 0 and returner.skipped >= 3
    deadline = time.monotonic() + 10
    while returner.returns < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    returner.stop()
    returner.join(timeout=5)
    assert returner.returns >= 1
