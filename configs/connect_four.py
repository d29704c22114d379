"""Standard 6x7 Connect Four: the fast default (seed 001's Table 5.4 settings are
configs/connect_four_thesis.py; this one is not the seed's: 64 filters, 50 simulations).

PUCT with its Q-values in the game's [-1, 1] (`puct_values="raw"`, not mctx's min-max stretch):
in the CPU recipe with PUCT it beat Gumbel 147-78 with 15 draws at 15 minutes (two seeds;
docs/strength.md, "Raw PUCT on Connect Four"), and on Hex and Othello raw values learned far
faster than mctx's ("PUCT's values unstretched"), and the seed's equation 3.1 adds Q in [-1, 1] too.
"""

OVERRIDES = dict(
    rows=6,
    cols=7,
    connect=4,
    num_blocks=3,
    num_filters=64,
    value_hidden=64,
    num_simulations=50,
    dirichlet_alpha=1.0,
    puct_values="raw",
    sample_moves=8,
    replay_games=5000,
    train_batch_size=512,
    learning_rate=0.01,
)
