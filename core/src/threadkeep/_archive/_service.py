"""Opening an :class:`Archiver` from configuration."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from .._errors import InvalidArgument
from .._settings import load_settings
from .._store import Store
from .._store_tiering import open_archive
from ._archiver import Archiver

__all__ = ["open_archiver"]


@asynccontextmanager
async def open_archiver(
    store: Store, archive_url: str | None = None, **options: Any
) -> AsyncIterator[Archiver]:
    """Open the archive at ``archive_url`` and yield an :class:`Archiver` over ``store``.

    Use as ``async with open_archiver(store, "s3://bucket/prefix") as archiver:``.

    Args:
        store: An open store whose driver declares ``archive``.
        archive_url: ``file:///path`` or ``s3://bucket/prefix``; default
            ``THREADKEEP_ARCHIVE_URL``, then the settings file's ``archive_url``.
        **options: Options of :class:`Archiver` (``single_put_bytes``).

    Raises:
        InvalidArgument: If no archive URL is given or configured, or it is not a ``str``.
        UnknownDriver: If no installed archive driver serves its scheme.
        CapabilityNotSupported: If the store cannot archive.
    """
    given: object = archive_url  # untyped callers pass anything
    if given is not None and not isinstance(given, str):
        msg = f"archive_url must be a str like 'file:///var/archive', not {given!r}"
        raise InvalidArgument(msg)
    url = archive_url or load_settings().archive_url
    if not url:
        msg = "no archive URL: pass one, or set THREADKEEP_ARCHIVE_URL (file:///… or s3://…)"
        raise InvalidArgument(msg)
    async with open_archive(url) as archive:
        yield Archiver(store, archive, **options)
