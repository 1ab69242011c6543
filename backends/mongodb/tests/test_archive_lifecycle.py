"""Cold archiving end to end on MongoDB: the hot store here, a ``file://`` archive beside it.

Runs :class:`threadkeep_contract_tests.ArchiveLifecycleContract`
(archive, read back, rehydrate, idempotent re-runs, crashes after each step, erasure).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from threadkeep import FileArchive, Store
from threadkeep_contract_tests import ArchiveLifecycleContract


class TestMongoWithFileArchive(ArchiveLifecycleContract):
    """``threadkeep-mongodb`` archiving into a local directory."""

    @pytest.fixture
    def store_factory(self, make_store: Callable[..., Store]) -> Callable[..., Store]:
        return make_store

    @pytest.fixture
    def archive_factory(self, tmp_path: Path) -> Callable[..., FileArchive]:
        return lambda **options: FileArchive(f"file://{tmp_path / 'archive'}", **options)
