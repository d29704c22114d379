"""`python evaluate.py ...`, from a checkout: the same command as the installed `azjax-evaluate`
(azjax/commands/evaluate.py, which holds its code and its --help)."""

from azjax.commands.evaluate import main

if __name__ == "__main__":
    raise SystemExit(main())
