"""Tic-Tac-Toe: a small network and a short run; learns perfect play on a CPU in minutes."""

OVERRIDES = dict(
    num_blocks=1,
    num_filters=32,
    value_hidden=32,
    num_simulations=32,
    dirichlet_alpha=1.0,
    sample_moves=3,
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
