"""Fixtures for the archive tests: a memory hot store and a ``file://`` archive.

``store_factory`` and ``archive_factory`` are the contracts' convention
(``threadkeep_contract_tests``); ``store`` and ``archive`` are opened ones for other tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from uuid import uuid4

import pytest

from threadkeep import FileArchive, Store, open_store


@pytest.fixture
def store_factory() -> Callable[..., Store]:
    """``(**options) -> Store``: a private in-memory hot store, the same one per test."""
    url = f"memory://archive-{uuid4().hex}"
    return lambda **options: open_store(url, **options)


@pytest.fixture
def archive_factory(tmp_path: Path) -> Callable[..., FileArchive]:
    """``(**options) -> FileArchive`` on one empty directory per test."""
    return lambda **options: FileArchive(f"file://{tmp_path / 'archive'}", **options)


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """A private in-memory hot store (capability ``archive``)."""
    async with open_store(f"memory://archive-{uuid4().hex}") as opened:
        yield opened


@pytest.fixture
async def archive(tmp_path: Path) -> AsyncIterator[FileArchive]:
    """A ``file://`` archive on an empty directory."""
    async with FileArchive(f"file://{tmp_path / 'archive'}") as opened:
        yield opened
