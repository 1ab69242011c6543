"""The archiving lifecycle on the embedded default: SQLite hot store + ``file://`` archive."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from threadkeep import Store, open_store
from threadkeep_contract_tests import ArchiveLifecycleContract

pytest.importorskip("threadkeep_sql", reason="threadkeep-sql is not installed")


class TestSqliteWithFileArchive(ArchiveLifecycleContract):
    """``threadkeep-sql`` on SQLite archiving into a local directory."""

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[..., Store]:
        url = f"sqlite+aiosqlite:///{tmp_path / 'hot.db'}"
        return lambda **options: open_store(url, **options)
