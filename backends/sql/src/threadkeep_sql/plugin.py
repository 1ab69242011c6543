"""Entry-point plugin registering the SQL driver (group ``threadkeep``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threadkeep import hookimpl

__all__ = ["threadkeep_drivers", "threadkeep_schemes"]


@hookimpl
def threadkeep_drivers() -> list[type[Any]]:
    """Return the SQL driver class.

    It serves ``sqlite+aiosqlite``, ``sqlite``, ``postgresql+asyncpg`` and ``postgresql``.
    """
    from ._store import SqlDriver

    return [SqlDriver]


@hookimpl
def threadkeep_schemes() -> Mapping[str, Sequence[str]]:
    """Declare the schemes served, so only this plugin is imported for them."""
    return {
        "threadkeep_drivers": ("sqlite+aiosqlite", "sqlite", "postgresql+asyncpg", "postgresql")
    }
