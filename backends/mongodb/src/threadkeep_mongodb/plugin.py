"""Entry-point plugin registering the MongoDB driver (group ``threadkeep``)."""

from __future__ import annotations

from typing import Any

from threadkeep import hookimpl

__all__ = ["threadkeep_drivers"]


@hookimpl
def threadkeep_drivers() -> list[type[Any]]:
    """Return the MongoDB store class (schemes ``mongodb`` and ``mongodb+srv``)."""
    from ._store import MongoStore  # lazy: loading plugins must stay cheap

    return [MongoStore]
