"""6x7 Connect Four with seed 001's Table 5.4 settings (`train.py --config=connect_four_thesis`).

Seed 001 played 10,000 games, training after every 80 on 2,048 positions sampled from them for 5
epochs: here an iteration plays 42 plies (the longest game) of 80 lock-step games, restarting
finished ones, then takes 5 optimizer steps on batches of 2,048 positions; 125 iterations play at
least 10,000 games (about 80 x 42 / mean game length per iteration). Temperature 30 is
`sample_moves=30`: the first 30 plies sample from the visit counts, later ones take the argmax.
Table 5.4 says SGD and nothing of momentum: Keras's SGD, which seed 001 used, has none. The fast
default is configs/connect_four.py.
"""

GAME = "connect_four"

OVERRIDES = dict(
    rows=6,
    cols=7,
    connect=4,
    num_blocks=3,  # residual layers
    num_filters=128,
    search="puct",
    num_simulations=400,  # MCTS iterations
    c_puct=1.0,
    puct_values="minmax",  # mctx's PUCT, as the reproduction searched (the default is raw)
    dirichlet_alpha=0.5,
    dirichlet_fraction=0.25,
    sample_moves=30,  # temperature
    batch_games=80,
    iterations=125,
    optimizer="sgd",
    momentum=0.0,
    learning_rate=0.001,
    weight_decay=0.0,  # no L2 regularisation
    train_batch_size=2048,
    train_steps=5,  # epochs
)
