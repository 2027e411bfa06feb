"""One copy of each real model for the whole test run."""

from __future__ import annotations

import functools


@functools.cache
def real_model(name: str):
    """SmolLM2 (0.7 GB resident), Gemma 3 270M (1.4 GB), the translator, loaded once: a test that
    loads its own keeps another copy alive as long as it holds it (the lessons' sessions once held
    one each: 21 GB, and the run was killed for memory)."""
    import explorer

    return explorer.load_model(name, progress=False)
