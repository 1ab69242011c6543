"""Fixtures for the MongoDB driver's tests: a fresh database per test on the test server.

The server comes from ``THREADKEEP_TEST_MONGODB_URL`` (``bash .ci/services/mongodb.sh start``
then ``eval "$(bash .ci/services/mongodb.sh env)"``). Without it the tests skip with a
reason, unless ``THREADKEEP_REQUIRE_SERVICES=1`` (or ``--threadkeep-require-services``),
where a missing server is a failure. Each
test gets its own database (small collections: the test server scans some queries), which
is dropped afterwards.

Tests run with ``--import-mode=importlib``, so helpers are handed out as fixtures.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from threadkeep_contract_tests import require_service
from threadkeep_mongodb import MongoStore

MONGODB_ENV = "THREADKEEP_TEST_MONGODB_URL"

MakeStore = Callable[..., MongoStore]


def server_url() -> str:
    """Return the test server's URL, or skip (fail when services are required)."""
    return require_service(MONGODB_ENV, "MongoDB")


def with_database(url: str, database: str) -> str:
    """Return ``url`` with its path (the database name) replaced by ``database``."""
    scheme, _, rest = url.partition("://")
    hosts, _, path = rest.partition("/")
    query = path.partition("?")[2]
    return f"{scheme}://{hosts}/{database}" + (f"?{query}" if query else "")


@pytest.fixture
def mongo_server() -> str:
    """The test server's URL (no database in its path)."""
    return server_url()


@pytest.fixture
async def mongo_db(mongo_server: str) -> AsyncIterator[tuple[str, str]]:
    """Yield ``(store URL, database name)`` of a fresh database; drop it afterwards."""
    name = f"tk_test_{uuid.uuid4().hex[:16]}"
    yield with_database(mongo_server, name), name
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_server)
    try:
        await client.drop_database(name)
    finally:
        await client.close()


@pytest.fixture
def make_store(mongo_db: tuple[str, str]) -> MakeStore:
    """Return ``(**options) -> MongoStore`` (unopened) on this test's database."""
    url, _ = mongo_db

    def make(**options: Any) -> MongoStore:
        return MongoStore(url, **options)

    return make


@pytest.fixture
async def store(make_store: MakeStore) -> AsyncIterator[MongoStore]:
    """An open store on this test's database."""
    opened = await make_store().open()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def raw_db(mongo_server: str, mongo_db: tuple[str, str]) -> AsyncIterator[Any]:
    """The test's database through a plain PyMongo client (the back door)."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_server, uuidRepresentation="standard"
    )
    try:
        yield client[mongo_db[1]]
    finally:
        await client.close()
