"""Entry-point plugin registering the memory-service driver (group ``threadkeep``)."""

from __future__ import annotations

from typing import Any

from threadkeep import hookimpl

__all__ = ["threadkeep_drivers"]


@hookimpl
def threadkeep_drivers() -> list[type[Any]]:
    """Return the memory-service store class (scheme ``memservice``)."""
    from ._store import MemServiceStore

    return [MemServiceStore]
