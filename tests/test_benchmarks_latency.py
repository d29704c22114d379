"""benchmarks.latency prints one line per search, beside OpenSpiel's bot (toy sizes)."""

import pytest

from benchmarks import latency


def test_prints_every_search_with_its_time_against_openspiel(capsys):
    assert latency.main(["--game=tictactoe", "--sims=4", "--repeats=1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("tictactoe {}, 4 simulations, cpu")
    rows = {line[:48].strip(): line[48:].split() for line in lines[2:]}
    names = list(rows)
    assert names[:4] == [
        "azjax UCT (the mcts: agent), batch 1",
        "azjax pure MCTS (PUCT), batch 1",
        "azjax pure MCTS (PUCT), batch 64 (per position)",
        "the same, game by game",
    ]
    assert names[4].startswith("azjax ") and "+ network" in names[4] and len(names) == 6
    assert names[5] == "OpenSpiel MCTSBot (C++), one position"
    for name, (ms, ratio) in rows.items():  # toy searches: times of a few hundredths of a ms
        assert float(ms) >= 0 and ratio.endswith("x") and float(ratio[:-1]) >= 0, name
    assert rows[names[5]][1] == "1.00x"


def test_rejects_a_bad_count(capsys):
    with pytest.raises(SystemExit):
        latency.main(["--game=tictactoe", "--sims=0"])
    assert "at least 1" in capsys.readouterr().err
