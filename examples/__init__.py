"""Worked examples that are not part of the installed package (docs/adding_a_game.md)."""
