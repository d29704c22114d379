"""6x6 Othello as in seed 000, Table 5.1 (Experiment 1): `train.py --config=othello_thesis`.

Bruåsdal's (2020) settings: PUCT at 50 simulations, a 3-block, 128-filter ResNet, SGD with
momentum. `experiments.experiment1 --game=othello --full` trains with them. The faster default is
configs/othello.py (docs/strength.md, "Time to strength"). On a 2-core CPU an iteration's
self-play takes about 40 minutes and its 1,000 optimizer steps about 50 more (2.9 s a step of
1,024 positions); with 100 steps an iteration, as this config had until session 114, 85 minutes
stayed below pure MCTS at 16 simulations, which the CPU recipe (`--config=cpu`) passed in 1.6
minutes (docs/strength.md, "The same on 6×6 Othello").
"""

GAME = "othello"

OVERRIDES = dict(
    # every field configs/othello.py sets, as Table 5.1 has it (a named config applies over it)
    search="puct",
    batch_games=1024,
    iterations=25,  # 25 self-play processes x 1,000 games (Table 5.1): 25,600 games here
    optimizer="sgd",
    # Table 5.1's network transfer interval: optimizer steps between the weights self-play gets;
    # with checkpoint and evaluation every 10 iterations, its intervals of 10,000 steps
    train_steps=1000,
    size=6,
    augment=False,  # configs/othello.py turns samples; seed 000 did not (section 4.2)
    num_blocks=3,
    num_filters=128,
    value_hidden=128,
    num_simulations=50,
    c_puct=1.25,
    puct_values="minmax",  # mctx's muzero_policy, as the reproduction has always searched
    dirichlet_alpha=1.0,
    dirichlet_fraction=0.25,
    sample_moves=10,
    replay_games=5000,
    train_batch_size=1024,
    learning_rate=0.01,
    momentum=0.9,
    weight_decay=0.001,
    eval_epsilon=0.05,
    eval_games=20,  # evaluation games during training (40 after it: experiment1 --full)
)
