"""Activation patching: which layers and positions carry what makes two runs answer differently.

Two texts of the same length in tokens, a clean one and a corrupted one ("... John gave a drink
to" and "... Mary gave a drink to"), and two candidate next tokens (the clean answer and the
corrupted one). The logit difference LD = logit(answer) - logit(other) at the last position
tells which the model prefers. Run the corrupted text again with one piece of the clean run put
in its place: the residual stream entering layer L at position p, or one head's output at every
position. The share of the difference it restores,

    (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted),

is 1 where that piece alone brings the clean answer back, and 0 where it changes nothing.

A layer's positions (or heads) run as one batch: row b of the batch is patched at position b
(or head b), so a sweep is one pass per layer, not one per cell. For a translator the patched
positions are the source's, in the encoder, where the two source sentences differ; and then the
target's, in the decoder, whose residual differs only by what cross-attention read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from explorer.errors import InputError
from explorer.model import Record
from explorer.model.taps import Intervention
from explorer.model.trace import residual_stream_names
from explorer.session import GenerationSession

Progress = Callable[[float, str], None]
MAX_SHARED_STEPS = 8  # a translator's two runs are stepped while they agree, at most this far


def single_token(session: GenerationSession, text: str) -> int:
    """The id of ``text`` as one token of the model's vocabulary."""
    ids = session.tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise InputError(f"“{text}” is {len(ids)} tokens for this model; an answer must be exactly one token.")
    return ids[0]


def prepared_pair(loaded, clean_text: str, corrupted_text: str, answer: str = "", other: str = ""):
    """The two runs and the two answer ids. A blank answer is what that run would say next; a
    translator's runs are first stepped (greedy) while they say the same, so that they part at
    the token the source sentences disagree on."""
    clean, corrupted = GenerationSession(loaded, clean_text), GenerationSession(loaded, corrupted_text)
    if clean.is_encoder_decoder:
        for _ in range(MAX_SHARED_STEPS):
            if clean.top_candidates(1)[0].token_id != corrupted.top_candidates(1)[0].token_id or clean.finished:
                break
            clean.step()
            corrupted.step()
    answer_id = single_token(clean, answer) if answer else clean.top_candidates(1)[0].token_id
    other_id = single_token(clean, other) if other else corrupted.top_candidates(1)[0].token_id
    if answer_id == other_id:
        word = clean.tokenizer.decode([answer_id])
        raise InputError(
            f"Both answers are “{word}”: type two different tokens, or texts the model answers differently."
        )
    return clean, corrupted, answer_id, other_id


@dataclass
class PatchingResult:
    positions: list[str]  # the corrupted run's tokens at the patched positions (the source's for a translator)
    answer: str
    other: str
    clean_difference: float  # LD of the clean run
    corrupted_difference: float
    residual: np.ndarray  # (layers, positions): restored share, patching the residual entering each layer
    heads: np.ndarray  # (layers, heads): restored share, patching one head's output at every position
    stack: str  # "decoder", or "encoder" for a translator
    # A translator's decoder too: (decoder layers, target positions), patching the residual entering
    # each decoder layer at one target position (the target so far is the same in both runs).
    decoder_residual: np.ndarray | None = None
    decoder_positions: list[str] | None = None


def _put_rows(x: torch.Tensor, clean_values: torch.Tensor) -> torch.Tensor:
    """Row b of the batch gets the clean run's values (batch 1) at index b of the axis after the
    batch: the residual's position b (batch, T, d_model), or head b's output at every position
    (batch, heads, T, hd)."""
    rows = torch.arange(x.shape[0])
    x = x.clone()
    x[rows, rows] = clean_values[0, : x.shape[0]].to(x.dtype)
    return x


def _row_patch(tap: str, clean_values: torch.Tensor) -> Intervention:
    return Intervention(tap, lambda x, run: _put_rows(x, clean_values), f"patch {tap} from the clean run, per row")


def _check_pair(clean: GenerationSession, corrupted: GenerationSession) -> str:
    if clean.loaded is not corrupted.loaded:
        raise InputError("The clean and corrupted runs must be of the same model.")
    if clean.is_encoder_decoder:
        if len(clean.source_ids) != len(corrupted.source_ids) or clean.token_ids != corrupted.token_ids:
            raise InputError(
                f"The two source sentences must have the same number of tokens ({len(clean.source_ids)} and "
                f"{len(corrupted.source_ids)}) and the same target so far: change a word for one of the same length."
            )
        return "encoder"
    if len(clean.token_ids) != len(corrupted.token_ids):
        raise InputError(
            f"The two texts must have the same number of tokens ({len(clean.token_ids)} and "
            f"{len(corrupted.token_ids)}): change a word for one that is a single token too."
        )
    return "decoder"


@torch.inference_mode()
def patching_sweep(
    clean: GenerationSession, corrupted: GenerationSession, answer: int, other: int, progress: Progress | None = None
) -> PatchingResult:
    """Patch the clean run into the corrupted one, layer by layer: every position of the residual
    stream, then every head's output. ``answer`` and ``other`` are token ids."""
    stack = _check_pair(clean, corrupted)
    model, c = clean.model, clean.config
    n_layers = c.n_encoder_layers if stack == "encoder" else c.n_layers
    names = residual_stream_names(n_layers, stack)[:-1]  # the residual entering each layer
    head_taps = [f"{stack}.{i}.self_attn.z" for i in range(n_layers)]
    record = Record.taps(*names, *head_taps)

    if stack == "decoder":
        clean_out = model(clean.ids_tensor(clean.token_ids), record=record)
        clean_logits, clean_trace = clean_out.logits[0, -1].float(), clean_out.trace
        # The corrupted run's residual entering each layer: a patch at layer L reruns from there on.
        corrupted_trace = model(clean.ids_tensor(corrupted.token_ids), record=Record.taps(*names)).trace
    else:
        memory, clean_trace = model.encode(clean.ids_tensor(clean.source_ids), record=record)
        clean_logits = model(clean.ids_tensor(clean.token_ids), memory, last_only=True).logits[0, -1].float()

    def run(batch: int, layer: int, interventions=(), rows: torch.Tensor | None = None) -> torch.Tensor:
        """(batch,) LD of ``batch`` copies of the corrupted input, changed as ``interventions`` say;
        in the decoder rerun from ``layer`` on, the residual entering it given row by row from ``rows``."""
        target = clean.ids_tensor(corrupted.token_ids).expand(batch, -1)  # (batch, T)
        if stack == "encoder":  # a translator's encoder is small: run it whole
            source = clean.ids_tensor(corrupted.source_ids).expand(batch, -1)  # (batch, S)
            memory, _ = model.encode(source, interventions=interventions)
            logits = model(target, memory, last_only=True).logits[:, -1].float()  # (batch, vocab)
        else:
            hidden = corrupted_trace[names[layer]].expand(batch, -1, -1)  # (batch, T, d_model)
            if rows is not None:
                hidden = _put_rows(hidden, rows)
            logits = model.finish_from(hidden, layer, interventions=interventions).float()
        return logits[:, answer] - logits[:, other]

    clean_ld = float(clean_logits[answer] - clean_logits[other])
    corrupted_ld = float(run(1, 0)[0])
    if abs(clean_ld - corrupted_ld) < 1e-6:
        raise InputError("The two runs prefer the two tokens equally: there is no difference to restore.")

    def restored(ld: torch.Tensor) -> np.ndarray:
        return ((ld - corrupted_ld) / (clean_ld - corrupted_ld)).cpu().numpy()

    n_positions = len(corrupted.source_ids if stack == "encoder" else corrupted.token_ids)
    residual = np.zeros((n_layers, n_positions))
    heads = np.zeros((n_layers, c.n_heads))
    for layer in range(n_layers):
        if progress is not None:
            progress(layer / n_layers, f"Patching layer {layer} of {n_layers}")
        clean_residual = clean_trace[names[layer]]  # (1, T, d_model) entering the layer
        if stack == "decoder":  # where the rerun starts: put the clean rows in there
            residual[layer] = restored(run(n_positions, layer, rows=clean_residual))
        else:
            residual[layer] = restored(run(n_positions, layer, [_row_patch(names[layer], clean_residual)]))
        heads[layer] = restored(run(c.n_heads, layer, [_row_patch(head_taps[layer], clean_trace[head_taps[layer]])]))
    texts = corrupted.source_texts() if stack == "encoder" else corrupted.token_texts()
    tokenizer = clean.tokenizer
    result = PatchingResult(
        texts, tokenizer.decode([answer]), tokenizer.decode([other]), clean_ld, corrupted_ld, residual, heads, stack
    )
    if stack == "encoder":
        ld = _translator_decoder_sweep(clean, corrupted, answer, other)
        result.decoder_residual = restored(ld)
        result.decoder_positions = corrupted.token_texts()
    return result


def _translator_decoder_sweep(
    clean: GenerationSession, corrupted: GenerationSession, answer: int, other: int
) -> torch.Tensor:
    """(decoder layers, T) LD of the corrupted run with the clean run's decoder residual put in,
    entering each decoder layer at one target position (row b of a layer's batch: position b)."""
    model, n_layers = clean.model, clean.config.n_layers
    names = residual_stream_names(n_layers, "decoder")[:-1]  # the residual entering each decoder layer
    target = clean.ids_tensor(clean.token_ids)  # (1, T): the same in both runs
    memories = {run: model.encode(clean.ids_tensor(run.source_ids))[0] for run in (clean, corrupted)}  # (1, S, d)
    traces = {run: model(target, memories[run], record=Record.taps(*names)).trace for run in (clean, corrupted)}
    n_positions = target.shape[1]
    memory = memories[corrupted].expand(n_positions, -1, -1)  # (T, S, d): one row per patched position
    rows = []
    for layer in range(n_layers):
        hidden = traces[corrupted][names[layer]].expand(n_positions, -1, -1)  # (T, T, d_model)
        hidden = _put_rows(hidden, traces[clean][names[layer]])
        logits = model.finish_from(hidden, layer, memory=memory).float()  # (T, vocab)
        rows.append(logits[:, answer] - logits[:, other])
    return torch.stack(rows)
