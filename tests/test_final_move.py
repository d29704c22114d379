"""experiments/final_move.py: the move rules on a PUCT search's root, and the command."""

import numpy as np
import pytest

from experiments import final_move


def test_lcb_moves_take_the_best_bound_among_the_well_visited():
    visits = np.array([[16.0, 4.0, 1.0, 0.0], [4.0, 16.0, 4.0, 0.0]])
    q = np.array([[0.1, 0.3, 0.9, -np.inf], [0.5, 0.2, 0.6, -np.inf]])
    # width 0: the best Q among the moves with at least share * the most visits
    assert final_move.lcb_moves(visits, q, share=0.5, width=0.0).tolist() == [0, 1]
    assert final_move.lcb_moves(visits, q, share=0.2, width=0.0).tolist() == [1, 2]
    assert final_move.lcb_moves(visits, q, share=0.0, width=0.0).tolist() == [2, 2]
    # a wide bound favours visits: 0.3 - 1/2 < 0.1 - 1/4; 0.6 - 1/2 is still the best of row 2
    assert final_move.lcb_moves(visits, q, share=0.2, width=1.0).tolist() == [0, 2]
    # share 1: the most visited alone
    assert final_move.lcb_moves(visits, q, share=1.0, width=0.0).tolist() == [0, 1]


def test_final_move_prints_each_rule_on_a_solved_set(capsys):
    spec = "ckpt:pretrained/tictactoe,sims=8,search=puct"
    assert final_move.main([spec, "--shares=0.5", "--widths=0,1"]) == 0
    out = capsys.readouterr().out
    assert "573 solved positions of tictactoe" in out
    rows = [line for line in out.splitlines() if line.startswith("| share")]
    assert len(rows) == 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["mcts:sims=8"], "expected a ckpt: agent"),
        (["ckpt:pretrained/tictactoe,sims=8,search=gumbel"], "searches with gumbel"),
        (["ckpt:pretrained/tictactoe,search=puct", "--widths=x"], "--widths"),
    ],
)
def test_final_move_refuses_bad_input_in_one_line(argv, message, capsys):
    assert final_move.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
