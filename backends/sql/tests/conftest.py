"""Fixtures for the SQL driver's tests: SQLite files and throwaway PostgreSQL schemas.

PostgreSQL tests use ``THREADKEEP_TEST_POSTGRES_URL``; each test gets a fresh schema that is
created before and dropped after it (the contract suite's schemas come from a
``threadkeep_sql.testing.SchemaPool``: migrated once, then emptied and checked between
tests). Without the variable they skip with a reason, unless ``THREADKEEP_REQUIRE_SERVICES=1``,
where a missing server is a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from threadkeep_contract_tests import require_service
from threadkeep_sql import SqlStore
from threadkeep_sql.testing import SchemaPool

POSTGRES_ENV = "THREADKEEP_TEST_POSTGRES_URL"
# Variants of the PostgreSQL contract suite (.ci/run runs each as its own phase):
PARTITIONS_ENV = "THREADKEEP_TEST_SQL_PARTITIONS"  # N: every store hash-partitioned N ways
READ_URL_ENV = "THREADKEEP_TEST_SQL_READ_URL"  # a standby's URL: stores read from it
POOLER_URL_ENV = "THREADKEEP_TEST_SQL_POOLER_URL"  # a transaction-mode PgBouncer's URL

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


async def _admin(url: str, statement: str, database: str | None = None) -> None:
    target = make_url(url).set(database=database) if database else make_url(url)
    conn = await asyncpg.connect(asyncpg_dsn(target.render_as_string(hide_password=False)))
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@dataclass
class PgTarget:
    """Where a PostgreSQL store of a test lives and how the test reads it back directly.

    Attributes:
        url: The store URL.
        options: ``SqlStore`` keyword arguments (schema, and the variant's options).
        dsn: An asyncpg DSN of the primary database, bypassing any pooler or standby.
        search_path: The schema the store's tables are in.
    """

    url: str
    options: dict[str, Any] = field(default_factory=dict)
    dsn: str = ""
    search_path: str = "public"


@pytest.fixture(scope="session")
def pooled_database() -> Iterator[str | None]:
    """With ``THREADKEEP_TEST_SQL_POOLER_URL``: a database of this session's own, else ``None``.

    Session state (``search_path``) does not survive a transaction pooler, so pooled stores
    cannot live in per-test schemas: they share one database made for the session, whose
    ``public`` schema each test empties first (see :func:`pg_target`).
    """
    if not os.environ.get(POOLER_URL_ENV):
        yield None
        return
    url = postgres_url()
    name = f"tk_pooled_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(url, f'CREATE DATABASE "{name}"'))
    yield name
    asyncio.run(_admin(url, f'DROP DATABASE "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store file at the head revision and without rows, made once per session.

    The store itself creates it (open, then close: the WAL is checkpointed into the file),
    then every row is deleted again (the cursor secret its open stored, and any AUTOINCREMENT
    counter): a copy holds what a newly migrated file holds. Copying it costs a test about
    1 ms where the five Alembic revisions cost about 50 ms of CPU.
    """
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"

    async def migrate() -> None:
        store = SqlStore(f"sqlite+aiosqlite:///{path}")
        await store.open()
        await store.close()

    asyncio.run(migrate())
    with closing(sqlite3.connect(path)) as conn:
        names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        for (name,) in names:
            if name != "threadkeep_alembic_version":
                conn.execute(f'DELETE FROM "{name}"')
        conn.commit()
    for suffix in ("-wal", "-shm", "-journal"):
        assert not path.with_name(path.name + suffix).exists(), f"{suffix} left by close"
    return path


def copy_sqlite_template(template: Path, target: Path) -> str:
    """Copy the migrated, empty ``template`` to ``target``; return its store URL."""
    shutil.copyfile(template, target)
    return f"sqlite+aiosqlite:///{target}"


@pytest.fixture(scope="session")
def pg_schema_pool() -> Iterator[SchemaPool | None]:
    """The session's pool of contract-test schemas (``threadkeep_sql.testing``), or ``None``.

    ``None`` without a server (``pg_target`` then skips or fails), through a pooler (one
    shared database instead), and with a standby: a standby that has not replayed a
    schema's emptying yet would show the previous test's rows, where a new schema is
    simply missing until replayed.
    """
    if (
        not os.environ.get(POSTGRES_ENV)
        or os.environ.get(POOLER_URL_ENV)
        or os.environ.get(READ_URL_ENV)
    ):
        yield None
        return
    pool = SchemaPool(postgres_url(), prefix="tk_sql_test", **_variant_options())
    yield pool
    asyncio.run(pool.close())


@pytest.fixture
async def pg_target(
    pooled_database: str | None, pg_schema_pool: SchemaPool | None
) -> AsyncIterator[PgTarget]:
    """A fresh, empty place for a PostgreSQL store, in the variant the environment names.

    From the schema pool when there is one: a schema at the head with no rows (or, the first
    time, an empty schema the test's own store migrates), emptied or dropped afterwards.
    """
    url = postgres_url()
    if pg_schema_pool is not None:
        schema = await pg_schema_pool.take()
        options = {"schema": schema, **_variant_options()}
        yield PgTarget(url=url, options=options, dsn=asyncpg_dsn(url), search_path=schema)
        await pg_schema_pool.give_back(schema)
        return
    if pooled_database is not None:
        await _admin(url, "DROP SCHEMA public CASCADE; CREATE SCHEMA public", pooled_database)
        direct = make_url(url).set(database=pooled_database)
        pooled = make_url(os.environ[POOLER_URL_ENV]).set(database=pooled_database)
        yield PgTarget(
            url=pooled.render_as_string(hide_password=False),
            options={"pooler": "transaction", **_variant_options()},
            dsn=asyncpg_dsn(direct.render_as_string(hide_password=False)),
        )
        return
    schema = await create_schema(url)
    options = {"schema": schema, **_variant_options()}
    yield PgTarget(url=url, options=options, dsn=asyncpg_dsn(url), search_path=schema)
    await drop_schema(url, schema)


def _variant_options() -> dict[str, Any]:
    options: dict[str, Any] = {}
    if os.environ.get(PARTITIONS_ENV):
        options["partitions"] = int(os.environ[PARTITIONS_ENV])
    if os.environ.get(READ_URL_ENV):
        options["read_url"] = os.environ[READ_URL_ENV]
    return options


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
