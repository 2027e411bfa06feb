"""The questions a teacher puts to the class, each built from the live model on the teacher's page:
a lesson step's own question (its options, answer and why as ``explorer.lessons`` posed them), or
"what token comes next?" (the model's most probable candidates, the right answer its top one)."""

from __future__ import annotations

import re

from explorer import lessons
from explorer.session import GenerationSession
from explorer.tokens import visible
from explorer.workshop.service import Question

NEXT_TOKEN_OPTIONS = 6
# The kinds of question whose answer is the model's next token: every page covers what names it
# until the reveal (explorer.ui.answer_cover). "lesson-next": a lesson step's (``asks_next_token``).
HIDING_KINDS = frozenset({"next-token", "lesson-next"})


NEXT_TOKEN_TITLE = "Next token at position {}"


def asked_at(title: str) -> int | None:
    """The position a "what token comes next?" question was asked at, from its title (else None)."""
    found = re.fullmatch(NEXT_TOKEN_TITLE.format(r"(\d+)"), title)
    return int(found.group(1)) if found else None


def lesson_title(number: int, index: int) -> str:
    """A lesson question's title: "Lesson 1, step 1: The next-token distribution"."""
    return f"Lesson {number}, step {index + 1}: {lessons.step_of(number, index).title}"


def lesson_question(number: int, index: int, posed: lessons.Posed) -> Question:
    """Lesson ``number``'s step ``index`` (from 0), as it was posed on the teacher's model."""
    step = lessons.step_of(number, index)
    kind = "lesson-next" if step.asks_next_token else "lesson"
    return Question(kind, lesson_title(number, index), step.question, list(posed.options), posed.answer, posed.why)


def next_token_question(session: GenerationSession, n: int = NEXT_TOKEN_OPTIONS) -> Question:
    """Which token the model puts next after the session's text: its ``n`` most probable candidates,
    shuffled into alphabetical order (the order of the model's list would give the answer away)."""
    session.check_can_step()
    top = session.top_candidates(n)
    shown = {visible(t.text): t.probability for t in reversed(top)}  # two pieces shown alike: the likelier one's
    best = top[0]
    text = visible(session.token_texts()[-1]) if session.token_ids else ""
    # Read by each student after the reveal (only the teacher has the chart): the numbers themselves.
    runners_up = ", ".join(f"{visible(t.text)!r} {t.probability:.1%}" for t in top[1:3])
    why = (
        f"The model gives {visible(best.text)!r} {best.probability:.1%}, more than any other token"
        + (f" (then {runners_up})" if runners_up else "")
        + ": its likeliest next token (Step takes it when it decodes greedily; sampling may draw another)."
    )
    # "Likeliest", not "next": a student who stepped on their own under sampling may have seen another
    # token drawn, and must not be marked wrong for it.
    # The last token in plain quotes: "after …'·is'" (an ellipsis, then a Python repr) read oddly.
    after = f"after the last token, “{text}”" if text else "first"
    question = (
        f"Which token does the model find likeliest {after}? (The text has {len(session.token_ids)} tokens so far.)"
    )
    return Question(
        "next-token", NEXT_TOKEN_TITLE.format(len(session.token_ids)), question, sorted(shown),
        visible(best.text), why, {option: round(p, 6) for option, p in shown.items()},
    )  # fmt: skip
