"""Fixtures for the sync API and the framework integrations: one fresh store per backend.

``backend`` runs a test on SQLite (a file), PostgreSQL (a throwaway schema) and MongoDB (a
throwaway database); the servers come from ``THREADKEEP_TEST_POSTGRES_URL`` and
``THREADKEEP_TEST_MONGODB_URL`` and are skipped (failed under
``THREADKEEP_REQUIRE_SERVICES=1``) when unset. A framework's tests live in a folder of their
own and are collected only where the framework is installed (``uv run --group NAME``); see
``collect_ignore`` below and ``docs/integrations.md``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pymongo import MongoClient
from sqlalchemy.engine import make_url

import threadkeep
from threadkeep.sync import SyncStore
from threadkeep_contract_tests import require_service

# Folder -> the module its framework provides. A folder whose framework is not installed is
# not collected: the default dev environment has none of them; each CI phase installs one
# (its dependency group) and runs that folder alone.
FRAMEWORKS = {
    "openai_agents": "agents",
    "langchain": "langchain_core",
    "pydantic_ai": "pydantic_ai",
    "adk": "google.adk",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


collect_ignore = [name for name, module in FRAMEWORKS.items() if not _installed(module)]


@dataclass
class Backend:
    """A fresh, empty store location: ``url`` and driver ``options``."""

    name: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)

    def store(self, **options: Any) -> threadkeep.Store:
        """Return an unopened async store on this location."""
        return threadkeep.open_store(self.url, **{**self.options, **options})

    def sync_store(self, **options: Any) -> SyncStore:
        """Return an unopened blocking store on this location."""
        return SyncStore(self.store(**options))


def _pg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _pg_execute(url: str, statement: str) -> None:
    conn = await asyncpg.connect(_pg_dsn(url))
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def _with_database(url: str, database: str) -> str:
    scheme, _, rest = url.partition("://")
    hosts, _, path = rest.partition("/")
    query = path.partition("?")[2]
    return f"{scheme}://{hosts}/{database}" + (f"?{query}" if query else "")


@pytest.fixture(params=["sqlite", "postgresql", "mongodb"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Yield a fresh store location on each backend; drop its schema/database afterwards.

    A plain (sync) fixture, so both sync and async tests can use it.
    """
    if request.param == "sqlite":
        yield Backend("sqlite", f"sqlite+aiosqlite:///{tmp_path / 'threadkeep.db'}")
        return
    if request.param == "postgresql":
        url = require_service("THREADKEEP_TEST_POSTGRES_URL", "PostgreSQL")
        schema = f"tk_integ_{uuid.uuid4().hex[:12]}"
        asyncio.run(_pg_execute(url, f'CREATE SCHEMA "{schema}"'))
        yield Backend("postgresql", url, {"schema": schema})
        asyncio.run(_pg_execute(url, f'DROP SCHEMA "{schema}" CASCADE'))
        return
    server = require_service("THREADKEEP_TEST_MONGODB_URL", "MongoDB")
    database = f"tk_integ_{uuid.uuid4().hex[:16]}"
    yield Backend("mongodb", _with_database(server, database))
    client: MongoClient[dict[str, Any]] = MongoClient(server)
    try:
        client.drop_database(database)
    finally:
        client.close()
