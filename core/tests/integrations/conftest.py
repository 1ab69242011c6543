"""Fixtures for the sync API and the framework integrations: one fresh store per backend.

``backend`` runs a test on SQLite (a file), PostgreSQL (a throwaway schema) and MongoDB (a
throwaway database); the servers come from ``THREADKEEP_TEST_POSTGRES_URL`` and
``THREADKEEP_TEST_MONGODB_URL`` and are skipped (failed under
``THREADKEEP_REQUIRE_SERVICES=1``) when unset. A framework's tests live in a folder of their
own, collected only when named on the command line (see ``pytest_ignore_collect``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from hypothesis import settings
from pymongo import MongoClient
from sqlalchemy.engine import make_url

import threadkeep
from threadkeep.sync import SyncStore
from threadkeep_contract_tests import require_service

HERE = Path(__file__).parent

# One folder per framework. Their tests cost a few framework imports and agent runs each, so
# the default run (`pytest`, the configured testpaths) leaves them out and CI runs each folder
# in a phase of its own (.ci/run): a folder is collected only when it, or a path inside it,
# is named on the command line.
# `upstream` holds copies of the frameworks' own test files (upstream/conftest.py).
FRAMEWORK_FOLDERS = frozenset({"openai_agents", "langchain", "pydantic_ai", "adk", "upstream"})


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip collecting a framework folder unless the command line names it (or inside it)."""
    if collection_path.parent != HERE or collection_path.name not in FRAMEWORK_FOLDERS:
        return None
    for arg in config.args:
        asked = Path(arg.split("::", 1)[0]).resolve()
        if asked == collection_path or collection_path in asked.parents:
            return None
    return True


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


@contextmanager
def _provision(kind: str, folder: Path) -> Iterator[Backend]:
    """Make a fresh store location of ``kind`` (skip/fail without its server); drop it after."""
    if kind == "sqlite":
        yield Backend("sqlite", f"sqlite+aiosqlite:///{folder / 'threadkeep.db'}")
        return
    if kind == "postgresql":
        url = require_service("THREADKEEP_TEST_POSTGRES_URL", "PostgreSQL")
        schema = f"tk_integ_{uuid.uuid4().hex[:12]}"
        asyncio.run(_pg_execute(url, f'CREATE SCHEMA "{schema}"'))
        try:
            yield Backend("postgresql", url, {"schema": schema})
        finally:
            asyncio.run(_pg_execute(url, f'DROP SCHEMA "{schema}" CASCADE'))
        return
    server = require_service("THREADKEEP_TEST_MONGODB_URL", "MongoDB")
    database = f"tk_integ_{uuid.uuid4().hex[:16]}"
    try:
        yield Backend("mongodb", _with_database(server, database))
    finally:
        client: MongoClient[dict[str, Any]] = MongoClient(server)
        try:
            client.drop_database(database)
        finally:
            client.close()


BACKENDS = ["sqlite", "postgresql", "mongodb"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Yield a fresh store location on each backend, for one test.

    A plain (sync) fixture, so both sync and async tests can use it.
    """
    with _provision(request.param, tmp_path) as made:
        yield made


@pytest.fixture(scope="module", params=BACKENDS)
def module_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    """Yield a store location on each backend shared by a module's tests (fewer migrations).

    Tests that share it keep apart by owning their chats under a user id of their own.
    """
    with _provision(request.param, tmp_path_factory.mktemp(request.param)) as made:
        yield made


def bounded_settings(backend: Backend) -> settings:
    """The Hypothesis profile, cut for a differential state machine on ``backend``.

    A third of the profile's runs; a sixth on MongoDB, whose server is several times slower
    per call (the comparison itself is the same on every backend).
    """
    profile = settings.default
    share = 6 if backend.name == "mongodb" else 3
    return settings(
        profile,
        max_examples=max(4, profile.max_examples // share),
        stateful_step_count=profile.stateful_step_count,
    )


@pytest.fixture
def differential_settings() -> Any:
    """Return :func:`bounded_settings` (a fixture: tests cannot import this conftest)."""
    return bounded_settings


@pytest.fixture(scope="session")
def provision_backend() -> Any:
    """Return ``_provision``: ``provision(kind, folder)`` makes a fresh store location of a kind.

    ``kind`` is one of :data:`BACKENDS`; the context manager yields a :class:`Backend` and drops
    the location on exit (a fixture: tests cannot import this conftest).
    """
    return _provision
