"""Fixtures of the ADK tests: each session service under test, ADK's own ones included.

``service`` is ADK's ``InMemorySessionService``, its ``DatabaseSessionService`` over SQLite
(aiosqlite, a temp file), and ``ThreadkeepSessionService`` over SQLite, PostgreSQL and
MongoDB; a test narrows them by indirect parametrization (``@pytest.mark.parametrize(
"service", [...], indirect=True)``) with the names in :data:`SERVICES`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from google.adk.sessions import DatabaseSessionService, InMemorySessionService
from google.adk.sessions.base_session_service import BaseSessionService

from threadkeep.integrations.adk import ThreadkeepSessionService
from threadkeep.sync import SyncStore

SERVICES = [
    "adk-in-memory",
    "adk-database-sqlite",
    "threadkeep-sqlite",
    "threadkeep-postgresql",
    "threadkeep-mongodb",
]


@pytest.fixture(scope="module")
def threadkeep_stores(
    provision_backend: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], SyncStore]]:
    """Yield ``store_for(kind)``: one store per backend for the module, opened on first use.

    Tests keep apart in a shared store by app names of their own (the ``app`` fixture).
    """
    with ExitStack() as stack:
        opened: dict[str, SyncStore] = {}

        def store_for(kind: str) -> SyncStore:
            if kind not in opened:
                location = stack.enter_context(
                    provision_backend(kind, tmp_path_factory.mktemp(f"adk-{kind}"))
                )
                opened[kind] = stack.enter_context(location.sync_store())
            return opened[kind]

        yield store_for


async def _service(
    kind: str, tmp_path: Path, stores: Callable[[str], SyncStore]
) -> AsyncIterator[BaseSessionService]:
    if kind == "adk-in-memory":
        yield InMemorySessionService()
    elif kind == "adk-database-sqlite":
        database = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}")
        try:
            yield database
        finally:
            await database.close()
    else:
        # In a thread: provisioning a location runs a loop of its own.
        store = await asyncio.to_thread(stores, kind.removeprefix("threadkeep-"))
        yield ThreadkeepSessionService(store)


@pytest.fixture(params=SERVICES)
async def service(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    threadkeep_stores: Callable[[str], SyncStore],
) -> AsyncIterator[BaseSessionService]:
    """Each session service under test, empty as far as the test's app names go.

    A test narrows the services with ``@stale_checking`` (indirect parametrization).
    """
    async for made in _service(request.param, tmp_path, threadkeep_stores):
        yield made


@pytest.fixture
def app() -> str:
    """An app name no other test uses (the threadkeep stores are shared by the module)."""
    return f"app-{uuid.uuid4().hex[:12]}"
