"""One process at a time on a cache entry: two app processes that start together on an empty cache
(two replicas, two test workers) would otherwise both convert the same model, one deleting the
folder the other is reading."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no lock; every write is still atomic (a temporary name, then a rename)
    fcntl = None


@contextlib.contextmanager
def held(lock_path: Path) -> Iterator[None]:
    """An exclusive lock between processes on ``lock_path`` (created if absent), released on exit
    (and by the system if the process dies). A folder where no file can be created (a read-only
    cache) means no lock: the caller's atomic writes are then all there is."""
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path, "a")  # noqa: SIM115 -- held open for the lock's lifetime
    except OSError:
        yield
        return
    with handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
