"""Switching heads off from the page (explorer/analysis/ablation.py): what a person types, the
rerun it makes, and the marks on the head images."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis import ablation
from explorer.analysis.ablation import AblationResult, SwitchedOff
from explorer.present.views import ExplorerState
from explorer.session import InputError
from explorer.viz import head_grid, role_grid, thumbnails
from explorer.viz.roles import GAP, LEFT, SQUARE, TOP
from explorer.viz.thumbnails import CELL, LABEL, OFF_RGB
from tests.builders import stepped


@pytest.fixture(scope="module")
def session(checkpoints):
    return stepped(checkpoints["llama"], "one two three four", steps=4)


def test_what_a_person_types_is_read_and_written_back(session):
    chosen = ablation.parse(" 1.3,0.mlp ; 1.attention 1.3 ", session, "mean")
    assert chosen.heads == {(1, 3)} and chosen.sublayers == {(0, "mlp"), (1, "attention")} and chosen.method == "mean"
    assert chosen.text() == "0.mlp, 1.3, 1.attention"
    assert ablation.parse(chosen.text(), session, "mean") == chosen
    assert chosen.describe() == "layer 1 head 3, layer 0's feed-forward, layer 1's attention"
    assert not ablation.parse("", session)


@pytest.mark.parametrize(
    ("text", "says"),
    [("17", "is not a head or a sublayer"), ("1.x", "is not a head or a sublayer"), ("9.0", "layer 9"),
     ("1.99", "head 99 does not exist")],
)  # fmt: skip
def test_a_wrong_choice_says_how_to_write_it(session, text, says):
    with pytest.raises(InputError) as error:
        ablation.parse(text, session)
    assert says in str(error.value)
    with pytest.raises(InputError, match="zero, mean"):
        ablation.parse("1.1", session, "shuffle")


def test_the_rerun_compares_the_sessions_pass_with_the_changed_one(session):
    chosen = ablation.parse("1.0 1.1 1.2 1.3", session)
    result = ablation.ablate(session, chosen)
    ids = session.ids_tensor(session.token_ids)
    following = session.token_ids[1:]
    with torch.inference_mode():
        clean = session.model(ids).logits[0].softmax(-1)
        changed = session.model(ids, interventions=chosen.interventions()).logits[0]
    np.testing.assert_allclose(result.before, clean[np.arange(len(following)), following].numpy(), atol=1e-6)
    np.testing.assert_allclose(
        result.after, changed.softmax(-1)[np.arange(len(following)), following].numpy(), atol=1e-6
    )
    assert result.chosen_after == changed[:-1].argmax(-1).tolist()
    assert session.interventions == () and len(session.steps) == 4  # the session is untouched
    with pytest.raises(InputError, match="Nothing is switched off"):
        ablation.ablate(session, SwitchedOff())


def test_where_the_greedy_choice_departs():
    result = AblationResult(SwitchedOff(frozenset({(0, 0)})), [5, 6, 7, 8, 9], 2, np.zeros(4), np.zeros(4),
                            chosen_after=[1, 99, 8, 3])  # fmt: skip
    # position 1 is the prompt's (never chosen); position 2's token 7 would now be 99
    assert result.departs_at == 2
    same = AblationResult(result.switched_off, [5, 6, 7, 8], 2, np.zeros(3), np.zeros(3), chosen_after=[0, 7, 8])
    assert same.departs_at is None


def test_switched_off_heads_are_crossed_out_where_heads_are_drawn(session):
    grid = np.asarray(head_grid(session.self_attention(1), causal=True, switched_off=[2]).convert("RGB"))
    diagonal = CELL // 3
    x2 = 2 * (CELL + thumbnails.GAP)  # head 2's column
    assert tuple(grid[LABEL + diagonal, x2 + diagonal]) == OFF_RGB
    assert tuple(grid[LABEL + diagonal, diagonal]) != OFF_RGB  # head 0 is not
    tags = [[""] * 4 for _ in range(2)]
    roles = np.asarray(role_grid(tags, np.zeros((2, 4)), switched_off={(1, 3)}))
    x, y = LEFT + 3 * (SQUARE + GAP), TOP + 1 * (SQUARE + GAP)
    assert tuple(roles[y + SQUARE // 3, x + SQUARE // 3]) == OFF_RGB
    assert tuple(roles[TOP + SQUARE // 3, LEFT + SQUARE // 3]) != OFF_RGB


def test_a_new_model_forgets_the_heads_switched_off(session, checkpoints):
    state = ExplorerState("llama")
    state.start("llama", session)
    state.switched_off = SwitchedOff(frozenset({(1, 3)}))
    state.start("llama", session)  # a new text on the same model keeps the choice
    assert state.switched_off
    other = explorer.GenerationSession(explorer.load_model(str(checkpoints["gpt2"])), "one two")
    state.start("gpt2", other)
    assert not state.switched_off
