"""Entry-point plugin registering the jsonl driver (group ``threadkeep``, hook below).

``pyproject.toml`` points the entry point ``jsonl`` of the group ``threadkeep`` at this
module; threadkeep's plugin manager loads the group and calls the hook.
"""

from __future__ import annotations

from typing import Any

from threadkeep import hookimpl

__all__ = ["threadkeep_drivers"]


@hookimpl
def threadkeep_drivers() -> list[type[Any]]:
    """Return the jsonl driver class (scheme ``jsonl``); imported lazily, as hooks should."""
    from ._store import JsonlDriver

    return [JsonlDriver]
