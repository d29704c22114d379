"""6x6 Othello's recipe for a GPU (docs/strength.md, "PUCT's values unstretched").

PUCT search at 64 simulations with its Q-values in the game's [-1, 1] (`puct_values="raw"`, not
mctx's min-max stretch), c_puct 1.25 and Dir(1) root noise at 0.25: on one H200, 75 seconds each
from scratch, its run errs in 0.126 of the shipped solved positions against Gumbel's 0.171 and
won 15-3 against it, its self-play 1.23x as fast (docs/strength.md, "PUCT's values
unstretched"; Gumbel, `--search=gumbel`, was this config's search until then, and the H100 and
H200 figures of docs/strength.md before session 34 are Gumbel's). A 3-block, 64-filter ResNet,
Adam, each sampled position turned by a random one of the square's 8 symmetries (`augment`: on
one H200, two minutes from scratch, the run with it errs in 0.119 of the solved positions
against 0.154 without, and won 16-3 against the run without; docs/strength.md, "Augmentation on
a GPU"). (`pretrained/othello6` is from 60 minutes of `--config=cpu` on a CPU, with the mobility
planes, a decayed rate and branched restarts, none of them measured on a GPU yet.) Seed 000's Table
5.1 settings (PUCT with mctx's values, 50 simulations, 3 x 128, SGD) are
configs/othello_thesis.py (`--config=othello_thesis`); on a CPU use `--config=cpu`
(configs/cpu.py).
"""

OVERRIDES = dict(
    size=6,
    search="puct",
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
    # Table 5.1's constants, with PUCT's Q-values unstretched (raw): at 15 minutes of the CPU
    # recipe with PUCT, exact error rate 0.117 against 0.267 with mctx's min-max values
    # (docs/strength.md, "PUCT's values unstretched"); othello_thesis keeps mctx's
    c_puct=1.25,
    puct_values="raw",
    dirichlet_alpha=1.0,
    dirichlet_fraction=0.25,
)
