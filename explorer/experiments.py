"""Experiments on a model: switch heads or sublayers off, patch activations from another run.

    import explorer
    session = explorer.GenerationSession(loaded, "When Mary and John went to the store, John gave a drink to")
    branch = session.with_interventions(explorer.ablate_heads({9: [6, 9]}))  # the same tokens, rerun
    other = explorer.GenerationSession(loaded, "When Mary and John went to the store, Mary gave a drink to")
    patched = session.with_interventions([explorer.patch("decoder.12.resid_after_ffn", [14], other)])

The interventions themselves are pure torch (explorer/model/interventions.py); a patch's source
here may also be a whole session, whose run gives the values.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from explorer.model import Record
from explorer.model.interventions import ablate_heads, ablate_sublayer, patch_values
from explorer.model.taps import Intervention
from explorer.session import GenerationSession, InputError

__all__ = ["Intervention", "ablate_heads", "ablate_sublayer", "patch", "tap_values"]


def patch(tap: str, positions: Iterable[int], source: GenerationSession | torch.Tensor) -> Intervention:
    """Take the tap's values at ``positions`` from another run: a session (one pass over its whole
    sequence, under its own interventions) or the tap's tensor from a whole-sequence pass."""
    positions = list(positions)
    values = tap_values(source, tap) if isinstance(source, GenerationSession) else source
    return patch_values(tap, positions, values, f"patch {tap} at positions {positions} from another run")


@torch.inference_mode()
def tap_values(session: GenerationSession, tap: str) -> torch.Tensor:
    """One tap's tensor over the session's whole sequence, in one pass under its interventions
    (an encoder tap: over the source); what a patch takes from another run."""
    record = Record.taps(tap)
    if tap.startswith("encoder."):
        source = session.ids_tensor(session.source_ids)  # (1, S)
        _, trace = session.model.encode(source, record=record, interventions=session.interventions)
    else:
        trace = session.full_pass(record).trace
    if tap not in trace:
        raise InputError(f"this model has no tap {tap!r} (explorer/model/trace.py lists them)")
    return trace[tap]
