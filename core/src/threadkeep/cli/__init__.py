"""The ``threadkeep`` command line (typer + rich)."""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """Run the command line."""
    raise SystemExit("threadkeep CLI: not built yet")
