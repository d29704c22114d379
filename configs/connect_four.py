"""Standard 6x7 Connect Four; network and search sizes after seed 001 (Tables 5.3-5.4)."""

OVERRIDES = dict(
    rows=6,
    cols=7,
    connect=4,
    num_blocks=3,
    num_filters=64,
    value_hidden=64,
    num_simulations=50,
    dirichlet_alpha=1.0,
    sample_moves=8,
    replay_games=5000,
    train_batch_size=512,
    learning_rate=0.01,
)
