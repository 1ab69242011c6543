"""Fixtures for the archive tests: a memory hot store and a ``file://`` archive."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest

from threadkeep import FileArchive, Store, open_store


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
