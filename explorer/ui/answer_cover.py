"""While a class (or a learner alone) predicts which token comes next, every view that names the
model's next token is covered, with a sentence that says why and until when.

What gives the answer away (surveyed view by view): the Next-token candidates; the logit lens
(its top row is the prediction at the newest token); *Why this token* (at the newest token it
offers the next token's candidates to explain). What does not: the token strip and the heatmaps
(they hold the tokens so far; the next one comes with a Step, which is the learner's own act),
the KV-cache lab, Compare runs and Switch heads off (the tokens on screen only), the causal proof
(no token named), Patching (its own two texts). A head's heatmap stays for "which token does this
head read most?": it is the very thing the question asks the class to read.

The page's script (static/answer_cover.js) covers the elements of ``COVERED``. The server says when: in
the page's hidden ``answer_cover`` box (``covered``: the sentence, the titles of the questions whose
reveal ends it, and the number of tokens it holds for: a Step or an Undo leaves it), for the
teacher's page, a following student's (the teacher's lesson step) and a learner alone; a student's
page also learns it from its open question (``explorer.ui.workshop_round``).
"""

from __future__ import annotations

import json

from explorer import lessons
from explorer.errors import InputError
from explorer.present.workshop_seats import Following, Leading
from explorer.ui import workshop_round
from explorer.workshop.questions import HIDING_KINDS, NEXT_TOKEN_TITLE, lesson_title

# What names the next token: covered while a question asks for it (static/answer_cover.js).
COVERED = (
    "#candidates", "#logit-lens", "#attribution-target", "#attribution-info", "#attribution-strip",
    "#attribution-chart", "#alignment",
)  # fmt: skip
UNTIL_CHECKED = (
    "Hidden until you check your answer (Check, in the Lessons panel): it would show the token the question asks for."
)
UNTIL_REVEALED = workshop_round.UNTIL_REVEALED  # (a student's page learns it with its question)


def covered(why: str, ends: list[str] | None = None, tokens: int | None = None) -> str:
    """The box's value: ``why`` is the sentence shown in place of each covered view; ``ends`` the
    titles of the questions whose reveal ends it; ``tokens`` how many tokens the strip holds
    while it applies (None: whatever it holds)."""
    return json.dumps({"why": why, "ends": ends or [], "tokens": tokens})


def ending_questions(number: int, index: int, tokens: int) -> list[str]:
    """The questions whose reveal ends the cover of lesson ``number``'s step ``index`` (from 0),
    which asks for the next token after its ``tokens`` set-up tokens: the step's own question, and
    "what token comes next?" asked at the same tokens (its answer is the same token)."""
    return [lesson_title(number, index), NEXT_TOKEN_TITLE.format(tokens)]


def ends_cover(at, title: str) -> bool:
    """Whether the reveal of the question ``title`` ends the cover of the lesson step ``at``."""
    return title in ending_questions(at.number, at.index, at.set_up_tokens)


def lesson_cover(st) -> str:
    """The cover of the lesson step on screen: its question asks for the next token, and the
    learner alone has not checked an answer yet (the teacher: the class has not seen it revealed;
    the teacher's panel refines this with the workshop's questions, ``teacher_cover``)."""
    at = getattr(st, "lesson", None)
    if at is None or st.model_name != at.model_name or not lessons.step_of(at.number, at.index).asks_next_token:
        return ""
    if st.session is None or len(st.session.token_ids) != at.set_up_tokens:
        return ""  # a Step showed the token (the page's script also uncovers it then: ``covered``'s tokens)
    seat = getattr(st, "workshop", None)
    if isinstance(seat, Following):
        return ""  # a student's page takes the teacher's (``student_cover``)
    if isinstance(seat, Leading):
        return covered(UNTIL_REVEALED, ending_questions(at.number, at.index, at.set_up_tokens), at.set_up_tokens)
    return "" if at.checked else covered(UNTIL_CHECKED, [lesson_title(at.number, at.index)], at.set_up_tokens)


def teacher_cover(st, tally) -> str:
    """The teacher's page (the projector): covered while a next-token question is open, and on a
    lesson step that asks for the next token until that step's question (or "what token comes
    next?" at its tokens) is revealed."""
    if tally is not None and not tally.revealed and tally.kind in HIDING_KINDS:
        return covered(UNTIL_REVEALED)
    at = st.lesson
    if at is not None and tally is not None and tally.revealed and ends_cover(at, tally.title):
        return ""
    return lesson_cover(st)


def student_cover(at: object, session: dict, tokens: int) -> str:
    """A following student's page on the teacher's lesson step ``at`` ([lesson, step index], as
    the teacher's view holds it, checked here) with the teacher's ``session`` (``tokens`` on the
    strip): covered while the tokens are the step's own, until the step's question (or "what
    token comes next?" at its tokens) is revealed (their page's script sees the reveal: ``covered``'s ends)."""
    if not (isinstance(at, list) and len(at) == 2 and all(type(n) is int for n in at)):
        return ""
    try:
        step = lessons.step_of(*at)
    except InputError:
        return ""
    generated = session.get("generated") if isinstance(session, dict) else None
    if not step.asks_next_token or not isinstance(generated, list) or len(generated) != step.setup.steps:
        return ""
    return covered(UNTIL_REVEALED, ending_questions(*at, tokens), tokens)
