"""The archiving lifecycle on PostgreSQL + S3, when both test servers are configured.

Needs ``THREADKEEP_TEST_POSTGRES_URL`` and ``THREADKEEP_TEST_S3_URL`` (see .ci/services/);
without them the tests skip with a reason, unless ``THREADKEEP_REQUIRE_SERVICES=1``. Each
test gets a fresh schema and a fresh key prefix, both removed afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from threadkeep import Store, open_store
from threadkeep_contract_tests import ArchiveLifecycleContract

pytest.importorskip("threadkeep_sql", reason="threadkeep-sql is not installed")
pytest.importorskip("threadkeep_s3", reason="threadkeep-s3 is not installed")

from threadkeep_contract_tests import require_service
from threadkeep_s3 import S3Archive
from threadkeep_sql.testing import SchemaPool


class TestPostgresWithS3Archive(ArchiveLifecycleContract):
    """``threadkeep-sql`` on PostgreSQL archiving into S3 (SeaweedFS in CI)."""

    @pytest.fixture
    async def store_factory(
        self, pg_schema_pool: SchemaPool | None
    ) -> AsyncIterator[Callable[..., Store]]:
        require_service("THREADKEEP_TEST_POSTGRES_URL", "PostgreSQL")  # skip or fail first
        assert pg_schema_pool is not None  # core/tests/conftest.py: made when the URL is set
        async with pg_schema_pool.schema() as url:  # a head schema without rows, reused
            yield lambda **options: open_store(url, **options)

    @pytest.fixture
    async def archive_factory(self) -> AsyncIterator[Callable[..., Any]]:
        root = (
            f"{require_service('THREADKEEP_TEST_S3_URL', 'S3').rstrip('/')}/pg-{uuid.uuid4().hex}"
        )
        yield lambda **options: S3Archive(root, **options)
        async with S3Archive(root) as opened:
            async for info in opened.list():
                await opened.delete(info.key)
