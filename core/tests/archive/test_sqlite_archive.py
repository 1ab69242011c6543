"""The archiving lifecycle on the embedded default: SQLite hot store + ``file://`` archive."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from threadkeep import Store, open_store
from threadkeep.testing_archive_lifecycle import ArchiveLifecycleContract

pytest.importorskip("threadkeep_sql", reason="threadkeep-sql is not installed")


class TestSqliteWithFileArchive(ArchiveLifecycleContract):
    """``threadkeep-sql`` on SQLite archiving into a local directory."""

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[Store]:
        async with open_store(f"sqlite+aiosqlite:///{tmp_path / 'hot.db'}") as opened:
            yield opened
