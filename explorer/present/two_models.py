"""What the "Two models" tab shows of a census (``explorer.analysis.two_models``), without Gradio:
the side-by-side summary, each model's table of strongest heads, and the agreement chart."""

from __future__ import annotations

import re

import numpy as np

from explorer.analysis.two_models import KINDS, ModelCensus, TwoModels
from explorer.tokens import visible
from explorer.viz.agreement import agreement_chart

TABLE_HEADERS = ["kind", "#", "head", "score"]
PER_KIND = 5  # the strongest heads listed per kind
LONG_TEXT = 4096  # the cache compared at this length too (past Gemma 3's window of 512)
SHORT_KINDS = {"previous token": "previous", "first token": "first (sink)", "induction": "induction"}
QUOTED_CHARS = 120  # the text read, quoted up to this many characters
MARKDOWN_SIGNS = re.compile(r"([\\`*_{}\[\]()#+\-.!<>|~])")  # a quoted text's own signs stay text


def head_rows(census: ModelCensus) -> list[list]:
    """The strongest heads of each kind, strongest first: [kind, rank, "L{layer}.H{head}", score]."""
    return [
        [SHORT_KINDS[kind], rank + 1, f"L{layer}.H{head}", f"{score:.2f}"]
        for kind in KINDS
        for rank, (layer, head, score) in enumerate(census.strongest(kind, PER_KIND))
    ]


def head_at(census: ModelCensus, row: int) -> tuple[int, int] | None:
    """The (layer, head) of a table row; None outside the table."""
    kind, rank = divmod(row, PER_KIND)
    if not 0 <= kind < len(KINDS):
        return None
    return census.strongest(KINDS[kind], PER_KIND)[rank][:2]


def table_label(census: ModelCensus, page_model: str, generated: int = 0) -> str:
    """A table's title: what a click on a row does. The second model's head switches the page to that
    model with the same text; the tokens generated on this page cannot follow (another tokenizer, and
    they are this model's choices): said before the click, not found missing after it."""
    if census.name == page_model:
        return f"{census.name}: strongest heads (click one: the page's model)"
    where = "opens on the page with the same text"
    if generated:
        where += f"; {left_behind(generated, 'here')}"
    return f"{census.name}: strongest heads (click one: {where})"


def left_behind(n: int, where: str) -> str:
    """ "the 3 tokens generated here are left behind", of ``n`` tokens generated ``where``."""
    if n == 1:
        return f"the token generated {where} is left behind"
    return f"the {n} tokens generated {where} are left behind"


def quoted(text: str) -> str:
    """The learner's text in a Markdown line: shortened, its line breaks shown (⏎), its signs escaped."""
    short = text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + "…"
    short = short.replace("\r", "").replace("\n", "⏎").replace("\t", " ")
    return "“" + MARKDOWN_SIGNS.sub(r"\\\1", short) + "”"


def text_read(result: TwoModels, page_text: str, box_text: str | None = None) -> str:
    """Which text both models read (the page's text, from which its tokens start, not the box's), and
    what to do when the page or the box now holds another one."""
    line = f"**Read by both**: {quoted(result.text)}, the text the page's tokens start from."
    if page_text != result.text:
        return line + " **The page now shows another text**: press **Read with both** to read that one."
    if box_text is not None and not box_text.strip():
        return line + (" **The box is empty**: type a text and press **Step** to start the page from it, "
                       "then **Read with both** to read it.")  # fmt: skip
    if box_text is not None and box_text != result.text:
        return line + (" **The box holds another text, not read yet**: press **Step** to start the page from it "
                       "(what you typed stays in the box), then **Read with both** again.")  # fmt: skip
    return line


def kib(n: float) -> str:
    return f"{n / 1024:,.1f} KiB"


def summary(result: TwoModels) -> str:
    """Both models side by side: shape, cache, speed; then where they agree along the text."""
    a, b = result.a, result.b
    rows = [
        ("layers × heads", *(f"{m.config.n_layers} × {m.config.n_heads}" for m in (a, b))),
        ("key/value heads", *(f"{m.config.n_kv_heads} (each for {m.config.queries_per_kv_head})" for m in (a, b))),
        ("head size", *(str(m.config.head_dim) for m in (a, b))),
        ("tokens of the text", *(str(len(m.tokens)) for m in (a, b))),
        ("KV cache per token", *(kib(m.kv_bytes_per_token) for m in (a, b))),
        (f"KV cache at {LONG_TEXT:,} tokens", *(f"{m.cache_bytes(LONG_TEXT) / 2**20:,.1f} MiB" for m in (a, b))),
        ("ms per cached step", *(f"{m.step_ms:.0f}" for m in (a, b))),
    ]
    lines = [f"| | **{a.name}** | **{b.name}** |", "|---|---|---|"]
    lines += [f"| {label} | {x} | {y} |" for label, x, y in rows]
    notes = [f"{m.name}: {m.sliding_note()}." for m in (a, b) if m.config.sliding_window]
    return "\n".join([*lines, "", *notes, "", agreement_text(result)])


def agreement_text(result: TwoModels) -> str:
    agreement = result.agreement
    if agreement is None:
        return result.agreement_note
    if not agreement.boundaries:
        return "The two tokenizations share no boundary inside this text: nothing to compare."
    divergence = agreement.divergence
    worst = np.argsort(-divergence, kind="stable")[:3]
    places = ", ".join(f"“{visible(agreement.segments[i])}” ({divergence[i]:.2f})" for i in worst)
    return (
        f"**Along the text**: {len(agreement.boundaries)} places where both have read the same characters; "
        f"their most probable next tokens agree at {agreement.agreement_rate:.0%} of them. "
        f"They differ most on what comes next at {places} (symmetric KL, nats, of “the text goes on as written”)."
    )


def agreement_figure(result: TwoModels) -> dict | None:
    agreement = result.agreement
    if agreement is None or not agreement.boundaries:
        return None
    labels = [visible(s) for s in agreement.segments]
    return agreement_chart(labels, agreement.p_a, agreement.p_b, agreement.agree, (result.a.name, result.b.name))
