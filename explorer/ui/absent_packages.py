"""Optional packages Gradio looks for on every event, remembered as absent once.

Gradio tries ``import matplotlib`` around every event (to switch its backend) and asks
``importlib.util.find_spec("polars")`` several times for every table it sends. When the package
is not installed, Python searches every folder of ``sys.path`` again each time: ~4% of a loaded
server's CPU samples (py-spy, 20 users stepping). A ``None`` in ``sys.modules`` is Python's own way
of saying "not importable": the import fails at once, as it would have failed anyway.
"""

from __future__ import annotations

import importlib.util
import sys

LOOKED_FOR_BY_GRADIO = ("matplotlib", "polars")


def remember_absent(names: tuple[str, ...] = LOOKED_FOR_BY_GRADIO) -> list[str]:
    """Mark each of ``names`` that is not installed as not importable; returns those marked."""
    marked = []
    for name in names:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            sys.modules[name] = None  # type: ignore[assignment]
            marked.append(name)
    return marked
