"""QK and OV circuits on the live model: why a head looks where it looks (qk.py), what it carries
(ov.py), which earlier heads it composes with (composition.py); all from the stream's components
(stream.py), read from one traced pass of the session (traced.py)."""

from .composition import Composition, composition, decoder_head
from .ov import Carried, carried_norms, what_it_carries
from .qk import WhyAttends, why_attends, why_row
from .traced import traced

__all__ = [
    "Carried",
    "Composition",
    "WhyAttends",
    "carried_norms",
    "composition",
    "decoder_head",
    "traced",
    "what_it_carries",
    "why_attends",
    "why_row",
]
