"""Entry-point plugin registering the S3 archive (group ``threadkeep``)."""

from __future__ import annotations

from typing import Any

from threadkeep import hookimpl

__all__ = ["threadkeep_archives"]


@hookimpl
def threadkeep_archives() -> list[type[Any]]:
    """Return the S3 archive class (scheme ``s3``)."""
    from ._archive import S3Archive

    return [S3Archive]
