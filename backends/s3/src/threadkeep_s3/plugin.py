"""Entry-point plugin registering the S3 archive (group ``threadkeep``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threadkeep import hookimpl

__all__ = ["threadkeep_archives", "threadkeep_schemes"]


@hookimpl
def threadkeep_archives() -> list[type[Any]]:
    """Return the S3 archive class (scheme ``s3``)."""
    from ._archive import S3Archive

    return [S3Archive]


@hookimpl
def threadkeep_schemes() -> Mapping[str, Sequence[str]]:
    """Declare the schemes served, so only this plugin is imported for them."""
    return {"threadkeep_archives": ("s3",)}
