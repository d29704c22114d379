"""6x7 Connect Four with seed 001's Table 5.4 settings (`train.py --config=connect_four_thesis`).

Seed 001 played 10,000 games, training after every 80 on 2,048 positions sampled from them for 5
epochs: here an iteration plays 42 plies (the longest game) of 80 lock-step games, restarting
finished ones, then takes 5 optimizer steps on batches of 2,048 positions drawn from the replay,
which holds that iteration's positions (`replay_games=80`: "a mini-batch of positions from the
information stored in the last games", its section 3.1); 125 iterations play at least 10,000 games
(about 80 x 42 / mean game length per iteration). Temperature 30 is `sample_moves=30`: the first 30
plies sample from the visit counts, later ones take the argmax. Table 5.4 says SGD and nothing of
momentum: Keras's SGD, which seed 001 used, has none. The network is AlphaZero's as its section
3.3 gives it at 3 blocks of 128 filters, the value head's hidden layer 256 wide.

Where this differs from the seed: its 5 epochs passed 5 times over one sample of 2,048
positions, here each of the 5 steps draws its own (with replacement, about 2,600 positions held);
its policy head is a 1 x 1 convolution of 2 filters, here the project's 3 x 3 one; its search
adds Q in [-1, 1] to c P sqrt(N) / (1 + n) (its equation 3.1), which is `puct_values="raw"`
(before session 114 this config searched with mctx's min-max Q values). The fast default is
configs/connect_four.py.
"""

GAME = "connect_four"

OVERRIDES = dict(
    rows=6,
    cols=7,
    connect=4,
    num_blocks=3,  # residual layers
    num_filters=128,
    value_hidden=256,  # the value head's rectified fully connected layer (section 3.3)
    search="puct",
    num_simulations=400,  # MCTS iterations
    c_puct=1.0,
    puct_values="raw",  # Q in [-1, 1], as its equation 3.1 adds it
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
    replay_games=80,  # the last iteration's games
)
