"""6x6 Hex's recipe for a GPU (docs/strength.md, "Time to strength", and "Raw PUCT against
Gumbel on 9x9 Hex and 8x8 Othello on an H200").

PUCT search at 64 simulations with its Q-values in the game's [-1, 1] (`puct_values="raw"`, not
mctx's min-max stretch), c_puct 1.25 and Dir(0.33) root noise at 0.25: on one H200, 90 seconds
each from scratch on 9x9 Hex, two seeds, its runs beat Gumbel's 17-3 and 12-8 at the same
self-play time an iteration (on the CPU recipe's 6x6 Hex the two were level, 121-119).
Gumbel (Danihelka et al. 2022, `--search=gumbel`) was this config's search until session 35:
the shipped Hex networks and the H100 figures of docs/strength.md were trained with it (on one
H100, `--time_budget=2.4`, its network won every game against the 6x6 ladder's rungs it met
within 47 s, and the network it trained in 145 s, `pretrained/hex6`, beat OpenSpiel's MCTS with
10,000 simulations 18 games to 2). A 3-block, 64-filter ResNet, Adam, games from random openings
of 0..2 plies. Seed 000's Table 5.1 settings (PUCT with mctx's values, 50 simulations, 3 x 128,
SGD) are configs/hex_thesis.py (`--config=hex_thesis`); on a CPU use `--config=cpu`
(configs/cpu.py).
"""

OVERRIDES = dict(
    size=6,
    swap=False,
    search="puct",
    num_simulations=64,
    num_blocks=3,
    num_filters=64,
    value_hidden=64,
    batch_games=512,
    opening_plies=2,
    sample_moves=10,
    replay_games=4096,
    train_batch_size=1024,
    train_steps=40,
    optimizer="adam",
    learning_rate=0.002,
    weight_decay=0.0001,
    eval_epsilon=0.05,
    # Table 5.1's constants, with PUCT's Q-values unstretched (raw): at 15 minutes of the CPU
    # recipe with PUCT, +530 Elo over mctx's min-max values, level with Gumbel (docs/strength.md,
    # "PUCT's values unstretched"); configs/hex_thesis.py keeps mctx's
    c_puct=1.25,
    puct_values="raw",
    dirichlet_alpha=0.33,
    dirichlet_fraction=0.25,
)
