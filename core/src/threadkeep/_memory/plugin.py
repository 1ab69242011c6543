"""Entry-point plugin registering the in-memory driver (group ``threadkeep``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._plugins import hookimpl

__all__ = ["threadkeep_drivers", "threadkeep_schemes"]


@hookimpl
def threadkeep_drivers() -> list[type[Any]]:
    """Return the in-memory driver class (scheme ``memory``)."""
    from ._store import MemoryDriver

    return [MemoryDriver]


@hookimpl
def threadkeep_schemes() -> Mapping[str, Sequence[str]]:
    """Declare the schemes served, so only this plugin is imported for them."""
    return {"threadkeep_drivers": ("memory",)}
