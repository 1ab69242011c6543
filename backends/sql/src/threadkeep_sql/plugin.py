"""Entry-point plugin registering the SQL driver (group ``threadkeep``)."""

from __future__ import annotations

from typing import Any

from threadkeep import hookimpl

__all__ = ["threadkeep_drivers"]


@hookimpl
def threadkeep_drivers() -> list[type[Any]]:
    """Return the SQL store class.

    It serves ``sqlite+aiosqlite``, ``sqlite``, ``postgresql+asyncpg`` and ``postgresql``.
    """
    from ._store import SqlStore

    return [SqlStore]
