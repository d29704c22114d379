"""Tic-Tac-Toe: a small network and a short run; learns perfect play on a CPU in minutes.

Gumbel search: with PUCT at 32-64 simulations the same run still lost 44-104 of 400 games to
perfect play (docs/experiments.md); Gumbel at 64 simulations lost none.

Self-play starts from random openings of 0..4 plies (session 60): 4 minutes on one core, the last
12 checkpoints at 50 simulations erred in 0.0009 of the 573 solved positions against 0.063
without them; the CPU recipe's three seeds in 0.0006, 0 and 0.0004 against 0.007 - 0.011 with
0..2 plies (docs/strength.md, "Tic-Tac-Toe's set"): the openings reach the positions that weaker
players make, which the set holds.
"""

OVERRIDES = dict(
    num_blocks=1,
    num_filters=32,
    value_hidden=32,
    search="gumbel",
    num_simulations=64,
    dirichlet_alpha=1.0,
    sample_moves=4,
    opening_plies=4,
    batch_games=256,
    replay_games=2000,
    train_batch_size=256,
    train_steps=50,
    optimizer="adam",
    learning_rate=0.003,
    weight_decay=0.0001,
    iterations=40,
    eval_interval=10,
    checkpoint_interval=10,
)
