"""The self-play benchmark runs end to end on a toy setting and prints a complete table."""

import dataclasses

import jax
import pytest

import games
from benchmarks import selfplay

TINY = [
    "--games",
    "hex",
    "--batch",
    "2",
    "--simulations",
    "2",
    "--blocks",
    "1",
    "--filters",
    "8",
    "--steps",
    "2",
    "--repeats",
    "1",
]


@pytest.mark.parametrize("network", ["resnet", "stub"])  # stub: issue 13's plumbing-alone form
def test_prints_a_table_of_positive_rates_and_ratios(network, capsys):
    rows = selfplay.main([*TINY, "--network", network])
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["game", "impl"])
    assert lines[header].endswith("vs recipe")
    table = [line.split() for line in lines[header + 1 : header + 5]]
    assert [(r[0], r[1], r[2], r[3]) for r in table] == [
        ("hex", "recipe", "gumbel", "none"),
        ("hex", "azjax", "gumbel", "none"),
        ("hex", "azjax", "puct", "none"),
        ("hex", "azjax", "gumbel", "random"),
    ]
    for r in table:
        assert float(r[4]) > 0  # positions/s
        assert r[-1].endswith("x") and float(r[-1][:-1]) > 0  # azjax / recipe
    assert table[0][-1] == "1.00x"
    assert rows[1].vs_recipe == pytest.approx(rows[1].positions_per_s / rows[0].positions_per_s)
    assert "hex: azjax gumbel / recipe = " in out and "target >= 1.2x" in out
    assert "hex: random rollouts" in out
    ratio = rows[2].positions_per_s / rows[1].positions_per_s  # puct / gumbel
    assert f"hex: azjax puct / azjax gumbel = {ratio:.3f}x" in out and "target >= 0.9x" in out
    assert all(len(r.round_seconds) == 1 for r in rows)  # one round: no spread printed
    assert "by round" not in out
    assert lines[0].startswith("machine: ") and " backend " in lines[0]


def test_the_round_by_round_ratio_pairs_chunks_timed_together():
    gumbel = selfplay.Row("hex", "azjax", "gumbel", "none", 0, 0, 0, 0, 1, (1.0, 2.0, 1.0))
    puct = selfplay.Row("hex", "azjax", "puct", "none", 0, 0, 0, 0, 1, (1.25, 2.0, 2.0))
    assert selfplay.round_spread(gumbel, puct) == "; by round: median 0.80x (0.50 - 1.00x)"
    assert selfplay.round_spread(gumbel._replace(round_seconds=(1.0,)), puct) == ""


def test_markdown_table():
    row = selfplay.Row("othello", "azjax", "gumbel", "none", 123.45, 6.7, 8.0, 1.25)
    lines = selfplay.format_table([row], markdown=True).splitlines()
    assert lines[0] == (
        "| game | impl | search | rollouts | positions/s | ms/move | compile s | vs recipe |"
    )
    assert lines[2] == "| othello | azjax | gumbel | none | 123.5 | 6.7 | 8 | 1.25x |"


@pytest.mark.parametrize(
    "flags",
    [
        ["--devices", "none"],
        ["--devices", "0"],
        ["--games", "chess"],
        ["--batch", "0"],
        ["--unroll", "0"],
        ["--compact", "0"],
        ["--playout_unroll", "0"],
    ],
)
def test_rejects_unsupported_flags(flags, capsys):
    with pytest.raises(SystemExit):
        selfplay.parse_args(flags)
    assert "error" in capsys.readouterr().err


def test_quick_and_explicit_sizes():
    args = selfplay.parse_args(["--quick", "--simulations", "4"])
    assert (args.batch, args.simulations, args.games) == (64, 4, ["hex", "othello"])
    args = selfplay.parse_args([])
    assert (args.batch, args.simulations, args.blocks, args.filters) == (256, 32, 3, 64)
    assert args.devices == "1"
    assert selfplay.parse_args(["--playout_unroll", "16"]).playout_unroll == 16


def test_puct_plays_with_the_games_configured_noise(monkeypatch):
    # what `train.py --game=G --search=puct` plays with, not SearchSpec's defaults
    specs = []
    monkeypatch.setattr(selfplay, "make_selfplay", lambda game, spec, *a: specs.append(spec))
    monkeypatch.setattr(selfplay, "_place", lambda mesh, v, s: (v, s))
    game = games.make("othello", size=8)
    setting = selfplay.Setting(
        batch=2, simulations=2, blocks=1, filters=4, steps=1, repeats=1, network="stub"
    )
    config = selfplay.load_config("othello")
    selfplay._azjax_variant(game, setting, "puct", "none", None, jax.random.PRNGKey(0), config)
    spec = specs[0]
    assert (spec.search, spec.num_simulations, spec.explore) == ("puct", 2, True)
    assert (spec.dirichlet_alpha, spec.c_puct, spec.dirichlet_fraction) == (1.0, 1.25, 0.25)
    assert spec.puct_values == "raw"  # configs/othello.py's, unless --puct-values says otherwise
    minmax = dataclasses.replace(setting, puct_values="minmax")
    selfplay._azjax_variant(game, minmax, "puct", "none", None, jax.random.PRNGKey(0), config)
    assert specs[1].puct_values == "minmax"
    assert selfplay.parse_args(["--puct-values", "minmax"]).puct_values == "minmax"
    assert selfplay.load_config("hex").dirichlet_alpha == 0.33  # SearchSpec's default, Hex's own
