"""Fixtures for the native importer tests: stores per backend, fixture files, a record reader.

``store`` runs on the reference driver and embedded SQLite; ``server_store`` on PostgreSQL
(``THREADKEEP_TEST_POSTGRES_URL``, a fresh schema per test) and MongoDB
(``THREADKEEP_TEST_MONGODB_URL``, a fresh database per test), skipping without them unless
services are required. ``records`` reads every chat back as plain tuples, so tests state the
expected records literally.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from threadkeep import Message, Store, open_store

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An open, empty store: the reference driver and the embedded default."""
    async with _opened(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture(params=["postgresql", "mongodb"])
async def server_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An open, empty store on each server backend (skips without the server)."""
    async with _opened(request.param, tmp_path) as opened:
        yield opened


class _opened:  # noqa: N801 - used like a function
    def __init__(self, backend: str, tmp_path: Path) -> None:
        self.backend, self.tmp_path = backend, tmp_path
        self.cleanup: Any = None
        self.store: Store | None = None

    async def __aenter__(self) -> Store:
        from threadkeep_contract_tests import require_service

        if self.backend == "memory":
            url = "memory://"
        elif self.backend == "sqlite":
            url = f"sqlite+aiosqlite:///{self.tmp_path / 'importers.db'}"
        elif self.backend == "postgresql":
            from threadkeep_sql.testing import temporary_schema

            server = require_service("THREADKEEP_TEST_POSTGRES_URL", "PostgreSQL")
            self.cleanup = temporary_schema(server, prefix="tk_imp")
            url = await self.cleanup.__aenter__()
        else:
            server = require_service("THREADKEEP_TEST_MONGODB_URL", "MongoDB")
            name = f"tk_imp_{uuid.uuid4().hex[:16]}"
            scheme, _, rest = server.partition("://")
            hosts, _, path = rest.partition("/")
            query = path.partition("?")[2]
            url = f"{scheme}://{hosts}/{name}" + (f"?{query}" if query else "")
            self.cleanup = (server, name)
        self.store = await open_store(url).open()
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        assert self.store is not None
        await self.store.close()
        if self.backend == "postgresql":
            await self.cleanup.__aexit__(None, None, None)
        elif self.backend == "mongodb":
            from pymongo import AsyncMongoClient

            server, name = self.cleanup
            client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(server)
            try:
                await client.drop_database(name)
            finally:
                await client.close()


@pytest.fixture
def fixture_copy(tmp_path: Path):
    """Copy a fixture file or folder (``FIXTURES / name``) into the test's directory."""

    def copy(name: str) -> Path:
        source = FIXTURES / name
        target = tmp_path / "in" / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy(source, target)
        return target

    return copy


def project(message: Message) -> tuple[Any, ...]:
    """A message as a plain tuple: what the tests state literally.

    ``(role, agui_id, content, tool_call_ref, calls, reasonings)`` where ``calls`` is a
    tuple of ``(agui_id, name, arguments, status)`` and ``reasonings`` of
    ``(content, encrypted_value)``; a boundary is ``("boundary", reason, agui_id, content)``.
    """
    if message.boundary is not None:
        return ("boundary", message.boundary.reason, message.agui_id, message.content)
    calls = tuple((c.agui_id, c.name, c.arguments, c.status.value) for c in message.tool_calls)
    reasonings = tuple((r.content, r.encrypted_value) for r in message.reasonings)
    return (
        message.role.value,
        message.agui_id,
        message.content,
        message.tool_call_ref,
        calls,
        reasonings,
    )


async def history(store: Store, user_id: str, thread_id: str) -> list[Message]:
    """Every visible message of a chat, oldest first (walking pages of 200)."""
    chat = await store.find_chat(user_id, thread_id)
    assert chat is not None, thread_id
    pages: list[list[Message]] = []
    cursor = None
    while True:
        page = await store.list_messages(chat.chat_id, limit=200, cursor=cursor)
        pages.append(page.items)
        if not page.has_more:
            return [m for items in reversed(pages) for m in items]
        cursor = page.next_cursor


class Reader:
    """Reads imported chats back for assertions."""

    project = staticmethod(project)
    history = staticmethod(history)

    @staticmethod
    async def records(store: Store, user_id: str, thread_id: str) -> list[tuple[Any, ...]]:
        """The chat's messages as :func:`project` tuples."""
        return [project(m) for m in await history(store, user_id, thread_id)]

    @staticmethod
    async def threads(store: Store, user_id: str) -> list[str]:
        """Every chat key of ``user_id``, sorted."""
        page = await store.list_chats({"user_id": user_id}, limit=200)
        return sorted(chat.thread_id for chat in page.items)


@pytest.fixture
def reader() -> type[Reader]:
    """Readers of imported chats (see :class:`Reader`)."""
    return Reader
