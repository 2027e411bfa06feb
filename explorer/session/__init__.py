"""One user's generation, step by step.

generation.py       GenerationSession: the tokens so far, the cache, the passes, undo, the views
step.py             one step, whole (choose, append, run, time, record; roll back on failure),
                    alone or batched with other sessions'
attention_store.py  the kept queries and keys that attention is computed from on demand
prompt.py           a prompt or source sentence, checked and tokenized
results.py          what a step hands out
"""

from explorer.errors import InputError
from explorer.session.generation import MAX_SESSION_POSITIONS, GenerationSession
from explorer.session.inputs import MAX_TEXT_CHARS
from explorer.session.results import SessionFinished, StepResult, StepTiming, TopToken
from explorer.session.step import Step, choose_together, run_together

__all__ = [
    "MAX_SESSION_POSITIONS", "MAX_TEXT_CHARS", "GenerationSession", "InputError", "SessionFinished", "Step",
    "StepResult", "StepTiming", "TopToken", "choose_together", "run_together",
]  # fmt: skip
