"""The archiving lifecycle on PostgreSQL + S3, when both test servers are configured.

Needs ``THREADKEEP_TEST_POSTGRES_URL`` and ``THREADKEEP_TEST_S3_URL`` (see .ci/services/);
without them the tests skip with a reason, unless ``THREADKEEP_REQUIRE_SERVICES=1``. Each
test gets a fresh schema and a fresh key prefix, both removed afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from threadkeep import Store, open_store
from threadkeep._archive._tiered import open_archive
from threadkeep.testing_archive_lifecycle import ArchiveLifecycleContract

pytest.importorskip("threadkeep_sql", reason="threadkeep-sql is not installed")
pytest.importorskip("threadkeep_s3", reason="threadkeep-s3 is not installed")


def _required(name: str) -> str:
    value = os.environ.get(name)
    if value:
        return value
    if os.environ.get("THREADKEEP_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{name} is not set and THREADKEEP_REQUIRE_SERVICES=1")
    pytest.skip(f"{name} is not set (see .ci/services/)")


async def _execute(url: str, statement: str) -> None:
    import asyncpg
    from sqlalchemy.engine import make_url

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


class TestPostgresWithS3Archive(ArchiveLifecycleContract):
    """``threadkeep-sql`` on PostgreSQL archiving into S3 (SeaweedFS in CI)."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[Store]:
        url = _required("THREADKEEP_TEST_POSTGRES_URL")
        schema = f"tk_arch_{uuid.uuid4().hex[:12]}"
        await _execute(url, f'CREATE SCHEMA "{schema}"')
        try:
            async with open_store(url, schema=schema) as opened:
                yield opened
        finally:
            await _execute(url, f'DROP SCHEMA "{schema}" CASCADE')

    @pytest.fixture
    async def archive(self) -> AsyncIterator[Any]:
        root = f"{_required('THREADKEEP_TEST_S3_URL').rstrip('/')}/pg-{uuid.uuid4().hex}"
        async with open_archive(root) as opened:
            try:
                yield opened
            finally:
                async for info in opened.list():
                    await opened.delete(info.key)
