"""The CPU recipe: what trains well on a 2-core CPU, over any game's defaults (docs/experiments.md).

A small network, 128 games in lock-step, Adam, Gumbel search (at 32 simulations it learned far
faster than PUCT with mctx's min-max values here); on Othello and Connect Four PUCT with raw
values (below). `python train.py --game=hex --size=6 --config=cpu` trains with it; also used by
`experiments.experiment1` at CPU scale and by the benchmarks.
"""

CPU_SCALE = dict(
    search="gumbel",
    num_blocks=2,
    num_filters=32,
    value_hidden=32,
    num_simulations=32,
    batch_games=128,
    replay_games=1000,
    train_batch_size=256,
    train_steps=30,
    optimizer="adam",
    learning_rate=0.003,
    weight_decay=0.0001,
)

# Hex at CPU scale starts games from random openings of 0..2 plies: without them self-play learns
# one line (docs/experiments.md, "Every opening"; Othello's 0..6 scored level with 0..2 against
# OpenSpiel's MCTS-10,000 at 30 minutes, 100 and 102 of 120 moving second). Session 62 moved to 0..4
# (at 20 minutes on 6x6 its runs erred in 0.005 and 0.006 of 6x6 Hex's solved positions against
# 0.010 and 0.009, two seeds; level head to head); session 63 moved back: over the hour, the
# target's length, the two erred alike (0.003 and 0.004) and the 0..4 hour won 209 of 240 against
# MCTSBot-10,000, under the target, where the 0..2 hour beside it won 217 and session 40's and 41's
# 229 and 224 (docs/strength.md, "The Hex hour from 0..4-ply openings"). The learning rate decayed
# to 0 was not told apart (0.012 against 0.011 at 20 minutes, 30-30), so Hex keeps a constant rate;
# branched restarts were level too (0.0103 against 0.0108, 57 - 63; docs/strength.md, "Branched
# restarts on 6×6 Hex"). Gumbel's root considering 8 moves, not 16, erred less on the set over
# four seeds at 20 minutes (0.0096 against 0.0114, z about -2.2) but was level head to head (121 -
# 119), and level over an hour (session 93: 0.904 against 0.913 vs MCTSBot-10,000, 5 against 8
# errors of the set): not adopted ("The Hex hour with Gumbel considering 8 moves"). A value term
# weighted 0.5 and a window of 2,000 games were level with the recipe on the set (0.0080 and 0.0093
# against 0.0091, two seeds) and changed no held-out loss (session 101: "The Hex gap"); so were
# policy surprise weighting at 0.5 and the root value mixed into the value target at 0.5 (0.0088
# and 0.0101 against 0.0089; session 102). PUCT with tree reuse (`search=puct,tree_reuse=true`)
# erred in 0.0087 of the set against PUCT's 0.0109 (four seeds, z = -1.0 and -2.6) and the recipe's
# 0.0109 (two), every match between them level; over the hour against MCTSBot-10,000 it scored
# 0.892 against the recipe's 0.929 from the initial position and 0.968 against 0.968 over every
# opening, 4 errors of the set each (session 108), so Hex keeps Gumbel (docs/strength.md, "Tree
# reuse on 6x6 Hex", "The Hex hour with PUCT and tree reuse"). Hex's self-play does
# not resign: a trained network knows the winner at the first searched move, and resigning there
# would cut 65 - 88% of the moves (`experiments.decided`; docs/strength.md, "Resignation").
# Hex trains on a random symmetry (180 degrees) of each sampled position: +120 Elo at 6 minutes, two
# seeds (docs/strength.md, "Recipes side by side"). On 6x6 Othello the 8 symmetries gained +64 Elo
# at 6 minutes (two seeds) and random openings nothing measurable there (for an hour they did:
# below), so Othello augments. An Othello iteration adds about as many positions as 30 steps of 256
# samples draw: 90 steps gained +76 Elo at 10 minutes (two seeds) for 17% fewer games; on Hex they
# were not told apart. The ownership target (weight 1.5, KataGo's) gained about +60 Elo at 10
# minutes on Othello (two seeds, 137-95 against the recipe without it) and about +130 at 6 minutes
# on Hex (163-77; docs/strength.md, "The ownership target"); on Connect Four, not told apart at 6
# minutes (126-108). Connect Four's mirror gained +172 Elo at 15 minutes (two seeds, 111-38 with 11
# draws against the recipe without it) and took its exact error rate from 0.243 to 0.200
# (docs/strength.md, "Connect Four's mirror"). Othello searches with PUCT, its config's raw values
# (configs/othello.py): at 15 minutes (two seeds) exact error rates 0.117 and 0.110 against Gumbel's
# 0.145 and 0.136, 66-51 with 3 draws head to head, and its hour 0.107, the lowest of any Othello
# hour (Gumbel's 0.121 - 0.128), beating the shipped network 24-13 (docs/strength.md, "The Othello
# hour with raw PUCT"); on 6x6 Hex the two were level (121-119), so Hex keeps Gumbel. Connect Four
# searches with PUCT and its config's raw values too: 147-78 with 15 draws against Gumbel at 15
# minutes, two seeds, and exact error rates 0.182 against 0.191 (docs/strength.md, "Raw PUCT on
# Connect Four"). Othello's self-play starts from random openings of 0..6 plies: its hour (one run)
# scored 66-14 against pure MCTS-10,000 over four seeds where the hour without them scored 46-30
# with 4 draws (it won 0.78 moving first, the side that loses with perfect play, against 0.38),
# erred in 0.101 of the solved positions (0.107) and beat that hour 24-14 with 2 draws
# (docs/strength.md, "The Othello hour from random openings"). Since session 49 Othello also sees
# the mobility planes (`mobility=true`), decays its rate to 0 over the run (`lr_schedule=cosine`)
# and restarts half its finished games one random move after another game's position
# (`branch_prob=0.5`, Go-Exploit's start states): its two hours (seeds 0 and 1) erred in 0.068 and
# 0.071 of the solved positions where the recipe's hours before erred in 0.101 and 0.103 (z = 4.8 -
# 5.3), beat them W97 D5 L58 and W88 D8 L64 head to head (the seed-1 hour against the seed-0 one W81
# D5 L74) and placed +1526 and +1340 on the ladder against the old hour's +1255; against
# MCTS-10,000, the target's measure, they scored 0.80 and 0.775 against 0.79 - 0.825, not told apart
# there (docs/strength.md, "The Othello recipe changed"). Each alone: the decayed rate erred in
# 0.083 and 0.089 (two seeds), the mobility planes in 0.084, the branches were not told apart at 20
# minutes (two seeds, 0.104 against 0.106, 115-107 with 18 draws), and branching 0.8 of them, not
# 0.5, was not told apart from the recipe (session 109: 0.092 against 0.091, 119-105 with 16 draws;
# "Branched restarts at 0.8 on 6×6 Othello"); TD(lambda) value targets
# (`value_lambda` 0.9, 0.95) were not told apart from the outcome at 20 minutes (docs/strength.md,
# "The cosine schedule with a second seed", "The mobility planes", "Branched restarts", "TD(λ) value
# targets"). The score utility (`score_utility=0.2`, the ownership head's margin mixed into every
# search's values) was not told apart at 20 minutes (two seeds, 0.110 against 0.106, 110-120 with 10
# draws) and its hour scored 0.66 against MCTS-10,000 (docs/strength.md, "The score utility");
# nor the ownership target at weight 3 (0.103 against 0.098, 59-54 with 7 draws), while 48 filters
# played 47% of the games and erred more (0.106, 51-66; "Ownership weight 3 and 48 filters"). On
# Connect Four the decayed rate, 90 steps an iteration and openings of 0..4 plies were each not told
# apart from its recipe at 20 minutes (session 60: one seed, the 3x3 head; exact error rates 0.174,
# 0.165 and 0.158 against 0.161 - 0.162; docs/strength.md, "The Othello recipe's additions on
# Connect Four"; random openings were measured again below), nor branched restarts
# (0.132 against 0.137, two seeds, and 36 - 62 head to head; "Branched restarts on Connect Four").
# Since session 103 Othello's self-play resigns (`resign_threshold=0.9`, AlphaZero's rule, a tenth
# of the slots played out): four seeds at 20 minutes finished 1.41 - 1.43 times the games (85% of
# them resigned, 0.4 - 0.9% of the checked resignations wrong), erred in 0.095, 0.086, 0.093 and
# 0.092 of the solved positions against the recipe's 0.092, 0.097, 0.092 and 0.098 (z = -1.4 and
# -0.6 over the two runs) and won 252 to 208 of the 480 games between the two recipes (20 draws);
# its hour (session 104, on a VM that ran 403 iterations where session 46's ran 725) scored 0.756
# against MCTS-10,000 where `pretrained/othello6`, trained without it, scored 0.80 in the same
# commands, level head to head (0.49), erring in 0.079 of the solved positions against 0.067;
# the hour without it on the same VM (session 105) was level with it (0.769 against MCTS-10,000,
# 0.081 of the solved positions, 0.49 head to head) (docs/strength.md, "Resignation in self-play
# on 6x6 Othello", "The Othello hour with resignation", "The Othello hour without resignation on
# the same VM"). Connect Four's does not: at 0.9 (two seeds, 20 minutes) a third of its games
# resigned, late, for 1.04 - 1.08 times the games, and it erred in 0.134 and 0.140 of the solved
# positions against 0.126 and 0.115 (z = +3.9; "Resignation on Connect Four").
# Since session 84 Connect Four's policy head is a 1x1 convolution (`policy_head_kernel=1`, a sixth
# less arithmetic): at 20 minutes its exact error rates were 0.139 against 0.149 (z = -2.4, seeds 0
# and 1) and 0.120 against 0.121 (seeds 2 and 3, on a VM twice as fast), over the hour 0.078 against
# 0.084 (z = -1.1, one seed), with 14 - 18% more games, and it won its same-seed pairs head to head
# 163 - 95 with 42 draws over the five (docs/strength.md, "A 1x1 policy head"); on 6x6 Othello and
# Hex it was level (0.097 against 0.098, 0.0113 against 0.0115), so they keep 3x3.
# Since session 96 Connect Four's self-play starts from random openings of 0..2 plies
# (`opening_plies=2`): with the 1x1 head, three seeds at 20 minutes, its exact error rates were
# 0.131, 0.143 and 0.146 against 0.154, 0.144 and 0.147, it won its same-seed pairs 101 - 56 with
# 23 draws and scored 0.704 against 0.650 against OpenSpiel's MCTSBot-3000 from the empty board
# (120 games each); 0..4 plies (two seeds) erred least (0.133, 0.127; z = -4.3) but won less
# (58 - 44 against the recipe, 41 - 61 against 0..2; 0.719 against the bot) (docs/strength.md,
# "Random openings on Connect Four"). `pretrained/connect_four` is an hour of session 85's recipe
# (the 1x1 head, no random openings), so `--init_from` loads all of it. Tic-Tac-Toe's self-play
# starts from random openings of 0..4 plies in its config (configs/tictactoe.py), so here too.
CPU_SCALE_BY_GAME = {
    "hex": dict(opening_plies=2, augment=True, ownership_weight=1.5),
    "othello": dict(
        search="puct",
        augment=True,
        train_steps=90,
        ownership_weight=1.5,
        opening_plies=6,
        mobility=True,
        lr_schedule="cosine",
        branch_prob=0.5,
        resign_threshold=0.9,
    ),
    "connect_four": dict(search="puct", augment=True, policy_head_kernel=1, opening_plies=2),
}


def cpu_recipe(game: str) -> dict:
    """The CPU recipe's overrides for `game`."""
    return {**CPU_SCALE, **CPU_SCALE_BY_GAME.get(game, {})}


recipe = cpu_recipe  # `train.py --game=G --config=cpu`: these settings over configs/G.py
