"""Tic-Tac-Toe: a small network and a short run; learns perfect play on a CPU in minutes.

Gumbel search: with PUCT at 32-64 simulations the same run still lost 44-104 of 400 games to
perfect play (docs/experiments.md); Gumbel at 64 simulations lost none.
"""

OVERRIDES = dict(
    num_blocks=1,
    num_filters=32,
    value_hidden=32,
    search="gumbel",
    num_simulations=64,
    dirichlet_alpha=1.0,
    sample_moves=4,
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
