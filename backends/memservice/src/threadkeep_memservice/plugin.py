"""Entry-point plugin (group threadkeep)."""
