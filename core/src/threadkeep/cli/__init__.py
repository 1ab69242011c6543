"""The ``threadkeep`` command line (typer + rich).

Commands live one group per module; each module defines ``register(app)``. To add a command
group, write ``cli/_<name>.py`` with a ``register`` function and add its module path to
:data:`COMMAND_MODULES`: nothing else changes. Shared options, store access and error
handling are in ``cli/_app.py``.
"""

from __future__ import annotations

import importlib

import typer

from ._app import create_app

__all__ = ["COMMAND_MODULES", "app", "build_app", "main"]

COMMAND_MODULES: tuple[str, ...] = (
    "threadkeep.cli._demo",
    "threadkeep.cli._import",
    "threadkeep.cli._read",
    "threadkeep.cli._archive",
    "threadkeep.cli._serve",
    "threadkeep.cli._copy",
    "threadkeep.cli._migrate",
    "threadkeep.cli._check",
)
"""Modules whose ``register(app)`` adds their commands, in help order."""


def build_app(modules: tuple[str, ...] = COMMAND_MODULES) -> typer.Typer:
    """Return a ``threadkeep`` app with the commands of ``modules`` registered.

    Raises:
        ImportError: If a module cannot be imported.
        AttributeError: If a module has no ``register`` function.
    """
    root = create_app()
    for name in modules:
        importlib.import_module(name).register(root)
    return root


app = build_app()
"""The ``threadkeep`` app (``typer.testing.CliRunner().invoke(app, [...])`` in tests)."""


def main() -> None:
    """Run the command line (the ``threadkeep`` console script)."""
    app()
