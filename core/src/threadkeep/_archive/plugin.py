"""Entry-point plugin registering the local-directory archive (group ``threadkeep``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._plugins import hookimpl

__all__ = ["threadkeep_archives", "threadkeep_schemes"]


@hookimpl
def threadkeep_archives() -> list[type[Any]]:
    """Return the local-directory archive class (scheme ``file``)."""
    from ._file import FileArchive

    return [FileArchive]


@hookimpl
def threadkeep_schemes() -> Mapping[str, Sequence[str]]:
    """Declare the schemes served, so only this plugin is imported for them."""
    return {"threadkeep_archives": ("file",)}
