"""Entry-point plugin registering the in-memory driver (group ``threadkeep``)."""

from __future__ import annotations

from typing import Any

from .._plugins import hookimpl

__all__ = ["threadkeep_drivers"]


@hookimpl
def threadkeep_drivers() -> list[type[Any]]:
    """Return the in-memory store class (scheme ``memory``)."""
    from ._store import MemoryStore

    return [MemoryStore]
