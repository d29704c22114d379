"""`python play.py ...`, from a checkout: the same command as the installed `azjax-play`
(azjax/commands/play.py, which holds its code and its --help)."""

from azjax.commands.play import main

if __name__ == "__main__":
    raise SystemExit(main())
