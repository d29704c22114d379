"""6x6 Othello: the recipe of the shipped networks (docs/strength.md, "Time to strength").

Gumbel search (Danihelka et al. 2022) at 64 simulations, whose improved policy is the policy
target, a 3-block, 64-filter ResNet, Adam, each sampled position turned by a random one of the
square's 8 symmetries (`augment`: on one H200, two minutes from scratch, the run with it errs in
0.119 of the shipped solved positions against 0.154 without, and won 16-3 against the run
without; docs/strength.md, "Augmentation on a GPU"). Without augmentation, on one H100
(`--time_budget=2.4`), its network won every game against the 6x6 ladder's rungs it met (up to
pure MCTS with 128 simulations) from iteration 10 (85 s). (`pretrained/othello6` is from 60
minutes of `--config=cpu` on a CPU, which beat that 149-s network 26-14.) Seed 000's Table 5.1
settings (PUCT, 50 simulations, 3 x 128, SGD) are configs/othello_thesis.py
(`--config=othello_thesis`); on a CPU use `--config=cpu` (configs/cpu.py).
"""

OVERRIDES = dict(
    size=6,
    search="gumbel",
    num_simulations=64,
    num_blocks=3,
    num_filters=64,
    value_hidden=64,
    batch_games=512,
    sample_moves=10,
    replay_games=4096,
    train_batch_size=1024,
    train_steps=40,
    augment=True,
    optimizer="adam",
    learning_rate=0.002,
    weight_decay=0.0001,
    eval_epsilon=0.05,
    # for --search=puct: Table 5.1's constants, with PUCT's Q-values unstretched (raw): at 15
    # minutes of the CPU recipe with PUCT, exact error rate 0.117 against 0.267 with mctx's
    # min-max values (docs/strength.md, "PUCT's values unstretched"); othello_thesis keeps mctx's
    c_puct=1.25,
    puct_values="raw",
    dirichlet_alpha=1.0,
    dirichlet_fraction=0.25,
)
