"""Entry-point plugin registering the MongoDB driver (group ``threadkeep``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threadkeep import hookimpl

__all__ = ["threadkeep_drivers", "threadkeep_schemes"]


@hookimpl
def threadkeep_drivers() -> list[type[Any]]:
    """Return the MongoDB store class (schemes ``mongodb`` and ``mongodb+srv``)."""
    from ._store import MongoDriver  # lazy: loading plugins must stay cheap

    return [MongoDriver]


@hookimpl
def threadkeep_schemes() -> Mapping[str, Sequence[str]]:
    """Declare the schemes served, so only this plugin is imported for them."""
    return {"threadkeep_drivers": ("mongodb", "mongodb+srv")}
