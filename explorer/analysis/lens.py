"""The logit lens: what each layer would predict if the model stopped there.

The residual stream after layer i goes through the model's own final norm and output head,
as the last layer's does. The last layer's row is therefore the model's real prediction;
the rows below it show when, going up the stack, the eventual answer appears.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.model import Record
from explorer.model.trace import residual_stream_names
from explorer.session import GenerationSession, InputError
from explorer.tokens import continuation_texts

RESIDUAL = Record.of("residual")


@dataclass
class LensRow:
    label: str  # "embeddings" or "layer i"
    token_ids: list[int]  # the k most probable next tokens, most probable first
    texts: list[str]
    probabilities: list[float]


@dataclass
class LogitLens:
    position: int  # the token after which the next token is predicted
    next_token_id: int | None  # the token that does follow it, if the session has one
    rows: list[LensRow]  # embeddings first, the last layer last


@torch.inference_mode()
def logit_lens(session: GenerationSession, position: int | None = None, k: int = 5) -> LogitLens:
    """Top-k next tokens at ``position`` (default: the newest token) read off every layer."""
    n = len(session.token_ids)
    position = n - 1 if position is None else position
    if not 0 <= position < n:
        raise InputError(f"position {position} does not exist; choose 0 to {n - 1}")
    labels = ["embeddings"] + [f"layer {i}" for i in range(session.config.n_layers)]
    if position == n - 1 and session.newest_residuals is not None:
        residuals = session.newest_residuals  # (layers + 1, d_model), kept by the step: no extra pass
    else:  # an earlier token: one parallel pass over the text
        trace = session.full_pass(RESIDUAL).trace
        names = residual_stream_names(session.config.n_layers)
        residuals = torch.stack([trace[name][0, position] for name in names])  # (layers + 1, d_model)
    probs = session.model.unembed(residuals).float().softmax(-1).cpu()  # (layers + 1, vocab)
    values, ids = probs.topk(k, dim=-1)  # (layers + 1, k)
    context = session.token_ids[: position + 1]
    rows = []
    for label, row_ids, row_values in zip(labels, ids.tolist(), values.tolist(), strict=True):
        rows.append(LensRow(label, row_ids, continuation_texts(session.tokenizer, context, row_ids), row_values))
    following = session.token_ids[position + 1] if position + 1 < n else None
    return LogitLens(position, following, rows)
