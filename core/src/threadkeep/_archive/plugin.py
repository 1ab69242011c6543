"""Entry-point plugin registering the local-directory archive (group ``threadkeep``)."""

from __future__ import annotations

from typing import Any

from .._plugins import hookimpl

__all__ = ["threadkeep_archives"]


@hookimpl
def threadkeep_archives() -> list[type[Any]]:
    """Return the local-directory archive class (scheme ``file``)."""
    from ._file import FileArchive

    return [FileArchive]
