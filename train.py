"""`python train.py ...`, from a checkout: the same command as the installed `azjax-train`
(azjax/commands/train.py, which holds its code and its --help)."""

from azjax.commands.train import main

if __name__ == "__main__":
    raise SystemExit(main())
