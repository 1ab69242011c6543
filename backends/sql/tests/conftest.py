"""Fixtures for the SQL driver's tests: SQLite files and throwaway PostgreSQL schemas.

PostgreSQL tests use ``THREADKEEP_TEST_POSTGRES_URL``; each test gets a fresh schema that is
created before and dropped after it. Without the variable they skip with a reason, unless
``THREADKEEP_REQUIRE_SERVICES=1``, where a missing server is a failure.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from threadkeep_contract_tests import require_service
from threadkeep_sql import SqlStore

POSTGRES_ENV = "THREADKEEP_TEST_POSTGRES_URL"

StoreFactory = Callable[..., Awaitable[SqlStore]]


def postgres_url() -> str:
    """Return the test server's URL, or skip/fail as the environment says."""
    return require_service(POSTGRES_ENV, "PostgreSQL")


def asyncpg_dsn(url: str) -> str:
    """Return a plain ``postgresql://`` DSN asyncpg accepts for a SQLAlchemy URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def create_schema(url: str) -> str:
    """Create a uniquely named schema on the test server and return its name."""
    schema = f"tk_sql_test_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
    finally:
        await conn.close()
    return schema


async def drop_schema(url: str, schema: str) -> None:
    """Drop a schema made by :func:`create_schema` and everything in it."""
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
async def pg_schema() -> AsyncIterator[tuple[str, str]]:
    """Create a fresh schema on the test server; yield ``(url, schema)``; drop it after."""
    url = postgres_url()
    schema = await create_schema(url)
    yield url, schema
    await drop_schema(url, schema)


@pytest.fixture(params=["sqlite", "postgresql"])
async def engine_url(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Yield ``(url, options)`` for a fresh, empty store on each engine."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'threadkeep.db'}", {}
        return
    url = postgres_url()
    schema = await create_schema(url)
    yield url, {"schema": schema}
    await drop_schema(url, schema)


@pytest.fixture
async def open_sql_store(
    engine_url: tuple[str, dict[str, Any]],
) -> AsyncIterator[StoreFactory]:
    """Return a factory opening stores on the test's database; closes them all afterwards."""
    opened: list[SqlStore] = []
    url, defaults = engine_url

    async def factory(**options: Any) -> SqlStore:
        store = SqlStore(url, **{**defaults, **options})
        await store.open()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        await store.close()


@pytest.fixture
async def store(open_sql_store: StoreFactory) -> SqlStore:
    """An open store on a fresh database (SQLite file, or PostgreSQL schema)."""
    return await open_sql_store()
