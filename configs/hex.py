"""6x6 Hex: the recipe of the shipped networks (docs/strength.md, "Time to strength").

Gumbel search (Danihelka et al. 2022) at 64 simulations, whose improved policy is the policy
target, a 3-block, 64-filter ResNet, Adam, games from random openings of 0..2 plies. On one H100
(`--time_budget=2.4`) its network won every game against the 6x6 ladder's rungs it met (up to pure
MCTS with 256 random-rollout simulations) within 47 s, and the network it trained in 145 s
(`pretrained/hex6`) beat OpenSpiel's MCTS with 10,000 simulations 18 games to 2. Seed 000's Table
5.1 settings (PUCT, 50 simulations, 3 x 128, SGD) are configs/hex_thesis.py
(`--config=hex_thesis`); on a CPU use `--config=cpu` (configs/cpu.py).
"""

OVERRIDES = dict(
    size=6,
    swap=False,
    search="gumbel",
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
    # for --search=puct: Table 5.1's constants, with PUCT's Q-values unstretched (raw): at 15
    # minutes of the CPU recipe with PUCT, +530 Elo over mctx's min-max values, level with Gumbel
    # (docs/strength.md, "PUCT's values unstretched"); configs/hex_thesis.py keeps mctx's
    c_puct=1.25,
    puct_values="raw",
    dirichlet_alpha=0.33,
    dirichlet_fraction=0.25,
)
