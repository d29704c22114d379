"""Per-game defaults: `configs/<game>.py` holds an `OVERRIDES` dict over `azjax.config.Config`.

Flags (`--name=value`) override these in turn.
"""
