"""6x6 Hex as in seed 000, Table 5.1 (Experiment 1)."""

OVERRIDES = dict(
    size=6,
    swap=False,
    num_blocks=3,
    num_filters=128,
    value_hidden=128,
    num_simulations=50,
    c_puct=1.25,
    dirichlet_alpha=0.33,
    dirichlet_fraction=0.25,
    sample_moves=10,
    replay_games=5000,
    train_batch_size=1024,
    learning_rate=0.01,
    momentum=0.9,
    weight_decay=0.001,
    eval_epsilon=0.05,
)
