"""Attribution: which input tokens made the model give this token its score.

What is explained is ``f``, the logit of one token at one position, before the softmax: for the
token the model chose at a step (or any candidate), the logit it had at the position that chose
it. The inputs are the token vectors as they enter the model (the embedding row, times √d_model
where the model scales it); position vectors stay as they are. For a translator the inputs are
the source tokens (in the encoder) and the target tokens so far (in the decoder) together.

- **Input × gradient**: a_i = x_i · ∂f/∂x_i. How much f would move, to first order, if token
  i's vector shrank toward zero. Cheap (one pass and its backward), but only local.
- **Integrated gradients** (Sundararajan et al., 2017): a_i = (x_i − b_i) · ∫₀¹ ∂f/∂x_i dα along
  the straight path b + α (x − b) from a baseline b to the input. The baseline replaces every
  input token by the padding token (the end token where there is none), positions kept. Zero
  vectors, the usual image baseline, do not work here: RMSNorm scales a vector to a fixed size,
  so f hardly moves along the path except in a sliver near zero, which no quadrature finds.
  Completeness: Σ_i a_i = f(x) − f(b), up to the error of the integral, which is computed with
  Gauss–Legendre quadrature (as Captum does by default) and reported.
- **Attention rollout** (Abnar & Zuidema, 2020) is not an attribution of the output: it follows
  how attention mixes positions through the layers (each layer's head average, with half of
  each row kept for the residual connection, multiplied layer by layer). Shown beside the
  gradient methods, labelled as attention-based. A translator's counterpart is the
  cross-attention row of the step, layer by layer: where the step read the source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from explorer.errors import InputError
from explorer.model import Record
from explorer.model.taps import Intervention
from explorer.session import GenerationSession
from explorer.tokens import visible

METHODS = {"integrated-gradients": "Integrated gradients", "input-x-gradient": "Input × gradient"}
IG_STEPS = 32
MAX_IG_STEPS = 256
ROWS_PER_PASS = 512  # path points × positions per pass: bounds the memory the backward pass keeps
Progress = Callable[[float, str], None]


@dataclass
class Attribution:
    method: str  # a key of METHODS
    position: int  # the query position whose logit is explained (the step that chose the token)
    token_id: int
    token: str
    tokens: list[str]  # the target-side tokens 0 .. position
    scores: np.ndarray  # (position + 1,) one score per target-side token
    source_tokens: list[str]  # a translator's source tokens ([] otherwise)
    source_scores: np.ndarray  # (S,) or (0,)
    logit: float  # f at the input
    baseline_logit: float  # f with every input token replaced by the baseline token
    baseline: str  # that token, as text
    steps: int  # integral points (1 for input × gradient)

    @property
    def total(self) -> float:
        return float(self.scores.sum() + self.source_scores.sum())

    @property
    def completeness_error(self) -> float:
        """|Σ a_i − (f(x) − f(baseline))| as a share of |f(x) − f(baseline)|: the integral's
        error for integrated gradients (input × gradient makes no such promise)."""
        change = self.logit - self.baseline_logit
        return abs(self.total - change) / max(abs(change), 1e-12)

    def summary(self) -> str:
        name = METHODS[self.method]
        change = self.logit - self.baseline_logit
        text = (
            f"{name} for {visible(self.token)!r} (its logit {self.logit:.3f} at position {self.position}; "
            f"{self.baseline_logit:.3f} at the baseline, where every input token but the first and the special ones "
            f"is `{self.baseline}`). "
            f"The scores add up to {self.total:.3f}"
        )
        if self.method == "integrated-gradients":
            return text + (
                f"; the logit changed by {change:.3f}: completeness holds within "
                f"{self.completeness_error:.2%} with {self.steps} points."
            )
        return text + f" (the logit's change from the baseline is {change:.3f}; this method does not promise it)."


def check_position(session: GenerationSession, position: int) -> None:
    if not 0 <= position < len(session.token_ids):
        raise InputError(f"position {position} does not exist; choose 0 to {len(session.token_ids) - 1}")


def check_target(session: GenerationSession, position: int, token_id: int) -> None:
    check_position(session, position)
    if not 0 <= token_id < session.config.vocab_size:
        raise InputError(f"token id {token_id} is not in the vocabulary (0 to {session.config.vocab_size - 1})")


def chosen_at(session: GenerationSession, index: int) -> tuple[int, int]:
    """(position, token id) that explains the token at ``index``: the logit it had one position earlier."""
    if not session.prompt_length <= index < len(session.token_ids):
        raise InputError("only a generated token was chosen by the model: pick a later token, or a next candidate")
    return index - 1, session.token_ids[index]


def _token_vectors(session: GenerationSession, stack: str, ids: torch.Tensor) -> torch.Tensor:
    """(1, T, d_model) the tokens' own vectors, as ``{stack}.embed`` adds them to the positions'."""
    embed = getattr(session.model, stack).embed
    return embed.embed_tokens(ids) * embed.scale


def _replace_tokens(stack: str, tokens: torch.Tensor, path: torch.Tensor) -> Intervention:
    """At ``{stack}.embed``, the token vectors ``tokens`` (1, T, d) become ``path`` (m, T, d)."""
    return Intervention(f"{stack}.embed", lambda x, run: x - tokens + path, f"move the {stack}'s token vectors")


def baseline_token(session: GenerationSession) -> int:
    """The token every moved input token becomes at the baseline: padding (or the end token without it)."""
    config = session.config
    return config.pad_token_id if config.pad_token_id is not None else config.eos_token_id


def kept_positions(session: GenerationSession, ids: list[int], stack: str) -> list[bool]:
    """Which input tokens the baseline keeps as they are: special tokens (a start or end token,
    as is usual for text), and the first token of a decoder's text, which is where most heads
    rest their attention (the "sink"); moving it would move every head at once, and the path
    from the baseline would then be too rough to integrate."""
    special = set(session.tokenizer.all_special_ids)
    return [token in special or (stack == "decoder" and i == 0) for i, token in enumerate(ids)]


def _inputs(session: GenerationSession, position: int) -> dict[str, torch.Tensor]:
    """The ids of each input stack: the target tokens 0..position, and a translator's source."""
    inputs = {"decoder": session.ids_tensor(session.token_ids[: position + 1])}  # (1, T)
    if session.is_encoder_decoder:
        inputs["encoder"] = session.ids_tensor(session.source_ids)  # (1, S)
    return inputs


@dataclass
class Explained:
    """What the tab shows: one method's scores (None for rollout alone) and the attention beside them."""

    method: str
    result: Attribution | None
    position: int
    token: str
    rollout: np.ndarray | None  # (position + 1,) a decoder's attention rollout
    cross_rows: np.ndarray | None  # (layers, S) a translator's cross-attention at the step


@dataclass
class PathPass:
    """One batched pass at points α of the path b + α (x − b): f (m,) and, per stack, the gradient
    dotted with the input x and with the baseline b, per position (m, T)."""

    f: torch.Tensor
    input_dot: dict[str, torch.Tensor]
    baseline_dot: dict[str, torch.Tensor]


def _path_pass(
    session: GenerationSession, inputs: dict[str, torch.Tensor], token_id: int, alphas: torch.Tensor
) -> PathPass:
    model, m = session.model, len(alphas)
    changes, paths, tokens, baselines = [], {}, {}, {}
    for stack, ids in inputs.items():
        tokens[stack] = _token_vectors(session, stack, ids).detach()  # (1, T, d)
        padding = _token_vectors(session, stack, torch.full_like(ids, baseline_token(session))).detach()
        kept = torch.tensor(kept_positions(session, ids[0].tolist(), stack), device=ids.device)[None, :, None]
        baselines[stack] = torch.where(kept, tokens[stack], padding)  # (1, T, d)
        step = alphas.view(m, 1, 1).to(tokens[stack].dtype)
        paths[stack] = (baselines[stack] + step * (tokens[stack] - baselines[stack])).requires_grad_()  # (m, T, d)
        changes.append(_replace_tokens(stack, tokens[stack], paths[stack]))
    changes += list(session.interventions)
    target = inputs["decoder"].expand(m, -1)  # (m, T)
    if session.is_encoder_decoder:
        memory, _ = model.encode(inputs["encoder"].expand(m, -1), interventions=changes)
        logits = model(target, memory, last_only=True, interventions=changes).logits
    else:
        logits = model(target, last_only=True, interventions=changes).logits
    f = logits[:, -1, token_id].float()  # (m,): row b depends only on path row b
    grads = dict(zip(paths, torch.autograd.grad(f.sum(), list(paths.values())), strict=True))
    return PathPass(
        f.detach(),
        {s: (grads[s] * tokens[s]).sum(-1).double() for s in grads},
        {s: (grads[s] * baselines[s]).sum(-1).double() for s in grads},
    )


def gauss_legendre(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Points in (0, 1) and weights that sum to 1: ∫₀¹ g ≈ Σ w_k g(α_k), exact for polynomials of degree < 2·steps."""
    nodes, weights = np.polynomial.legendre.leggauss(steps)
    return (nodes + 1) / 2, weights / 2


def _integrate(
    session: GenerationSession,
    inputs: dict[str, torch.Tensor],
    token_id: int,
    method: str,
    points: tuple[np.ndarray, np.ndarray],
    progress: Progress | None,
) -> tuple[float, float, dict[str, np.ndarray]]:
    """f at the input, f at the baseline, and the scores per stack, from path ``points`` (α, weight)."""
    alphas, weights = np.concatenate([points[0], [1.0, 0.0]]), np.concatenate([points[1], [0.0, 0.0]])
    chunk = max(1, ROWS_PER_PASS // sum(ids.shape[1] for ids in inputs.values()))
    f_values, sums = [], {stack: 0.0 for stack in inputs}
    with torch.enable_grad():
        for first in range(0, len(alphas), chunk):
            if progress is not None:
                progress(first / len(alphas), f"{METHODS[method]}: {first} of {len(alphas)} points on the path")
            part = torch.tensor(alphas[first : first + chunk], device=session.model_device)
            result = _path_pass(session, inputs, token_id, part)
            w = torch.tensor(weights[first : first + chunk], dtype=torch.float64, device=result.f.device)[:, None]
            f_values.append(result.f)
            for stack in inputs:
                # input x gradient: x · ∂f/∂x; integrated gradients: (x − b) · ∂f/∂x along the path
                dot = result.input_dot[stack]
                if method == "integrated-gradients":
                    dot = dot - result.baseline_dot[stack]
                # Rows without weight (the two ends, run for f alone) are left out, NaN or not.
                sums[stack] = sums[stack] + torch.where(w > 0, w * dot, 0).sum(0)
    f_all = torch.cat(f_values)
    return float(f_all[-2]), float(f_all[-1]), {stack: total.cpu().numpy() for stack, total in sums.items()}


def attribute(
    session: GenerationSession,
    position: int,
    token_id: int,
    method: str = "integrated-gradients",
    steps: int = IG_STEPS,
    tolerance: float = 0.01,
    max_steps: int = MAX_IG_STEPS,
    progress: Progress | None = None,
) -> Attribution:
    """Attribute the logit of ``token_id`` at ``position`` to the input tokens (see the module).

    Integrated gradients starts with ``steps`` points and doubles them while completeness is off
    by more than ``tolerance`` (a share of the logit's change), up to ``max_steps``: a real model's
    path can be rough, a tiny one's is smooth. The result says how many points it took.
    """
    if method not in METHODS:
        raise InputError(f"attribution method {method!r}? Choose one of {', '.join(METHODS)}")
    check_target(session, position, token_id)
    inputs = _inputs(session, position)
    overall = _RefiningProgress(progress, steps, max_steps)
    while True:
        points = (np.array([1.0]), np.array([1.0])) if method == "input-x-gradient" else gauss_legendre(steps)
        logit, baseline_logit, scores = _integrate(session, inputs, token_id, method, points, overall.level(steps))
        result = Attribution(
            method=method, position=position, token_id=token_id,
            token=session.tokenizer.decode([token_id]), tokens=session.token_texts()[: position + 1],
            scores=scores["decoder"], source_tokens=session.source_texts(),
            source_scores=scores.get("encoder", np.zeros(0)), logit=logit, baseline_logit=baseline_logit,
            baseline=session.tokenizer.convert_ids_to_tokens(baseline_token(session)), steps=len(points[0]),
        )  # fmt: skip
        if method == "input-x-gradient" or result.completeness_error <= tolerance or steps * 2 > max_steps:
            return result
        overall.refined(steps, result.completeness_error)
        steps *= 2


class _RefiningProgress:
    """One progress bar over every refinement of the integral. A rough path (often the newest
    token's) doubles the points from 32 to 256 until completeness holds, 480 path points in all,
    ~15x the time of a smooth one that 32 points settle: the bar says so instead of starting over."""

    def __init__(self, progress: Progress | None, steps: int, max_steps: int):
        self.progress, self.done, self.note = progress, 0, ""
        self.total = sum(steps * 2**k for k in range(max(1, int(np.log2(max_steps / steps)) + 1)))

    def level(self, steps: int) -> Progress | None:
        if self.progress is None:
            return None
        return lambda share, what: self.progress(min(1.0, (self.done + share * steps) / self.total), what + self.note)

    def refined(self, steps: int, error: float) -> None:
        self.done += steps
        self.note = f" (refining: {steps} points left the sum {error:.0%} off f(x) − f(b))"


def _attention_up_to(session: GenerationSession, position: int):
    """The trace of one pass over tokens 0 .. ``position``, keeping every layer's attention."""
    check_position(session, position)
    ids = session.ids_tensor(session.token_ids[: position + 1])  # (1, position + 1)
    return session.run_decoder(ids, record=Record.of("attention")).trace


@torch.inference_mode()
def attention_rollout(session: GenerationSession, position: int) -> np.ndarray:
    """(position + 1,) how much of position ``position``'s last layer comes from each input token,
    following attention alone: each layer's head average A, with the residual as 0.5·A + 0.5·I."""
    trace = _attention_up_to(session, position)
    rollout = torch.eye(position + 1, dtype=torch.float64)
    for layer in range(session.config.n_layers):
        mixed = trace.self_attention(layer)[0].double().mean(0).cpu()  # (T, T) head average
        mixed = 0.5 * mixed + 0.5 * torch.eye(position + 1, dtype=torch.float64)
        rollout = (mixed / mixed.sum(-1, keepdim=True)) @ rollout
    return rollout[-1].numpy()


@torch.inference_mode()
def cross_attention_rows(session: GenerationSession, position: int) -> np.ndarray:
    """(layers, S) a translator's step at ``position``: where each decoder layer's
    cross-attention (head average) read the source."""
    session.attention.require_translator("cross-attention")
    trace = _attention_up_to(session, position)
    rows = [trace.cross_attention(i)[0, :, -1].float().mean(0).cpu().numpy() for i in range(session.config.n_layers)]
    return np.stack(rows)


def top_positions(scores: Sequence[float], k: int = 3) -> list[int]:
    """The positions with the largest scores, largest first."""
    return [int(i) for i in np.argsort(-np.asarray(scores), kind="stable")[:k]]
