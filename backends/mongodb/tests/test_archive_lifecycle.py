"""Cold archiving end to end on MongoDB: the hot store here, a ``file://`` archive beside it.

Runs the core's :class:`threadkeep.testing_archive_lifecycle.ArchiveLifecycleContract`
(archive, read back, rehydrate, idempotent re-runs, crashes after each step, erasure).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from threadkeep import FileArchive, Store
from threadkeep.testing_archive_lifecycle import ArchiveLifecycleContract


class TestMongoWithFileArchive(ArchiveLifecycleContract):
    """``threadkeep-mongodb`` archiving into a local directory."""

    @pytest.fixture
    async def store(self, make_store: Any) -> AsyncIterator[Store]:
        async with make_store() as opened:
            yield opened

    @pytest.fixture
    async def archive(self, tmp_path: Path) -> AsyncIterator[FileArchive]:
        async with FileArchive(f"file://{tmp_path / 'archive'}") as opened:
            yield opened
