"""Fixtures for the AG-UI run-persistence tests: stores per backend, a scripted agent, real data.

Helpers are handed out as fixtures (tests run with ``--import-mode=importlib``).
PostgreSQL runs when ``THREADKEEP_TEST_POSTGRES_URL`` is set (a fresh schema per test);
real recorded data is read from ``../shared/realdata`` and the tests skip without it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)

from threadkeep import Message, MessageFilter, Store, open_store
from threadkeep_sql.testing import SchemaPool

REALDATA = Path(__file__).resolve().parents[3].parent / "shared" / "realdata"
POSTGRES_ENV = "THREADKEEP_TEST_POSTGRES_URL"

Script = Callable[[RunAgentInput], AsyncIterator[BaseEvent]]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def any_store(
    request: pytest.FixtureRequest, tmp_path: Path, pg_schema_pool: SchemaPool | None
) -> AsyncIterator[Store]:
    """An open, empty store of each backend (PostgreSQL: a schema of the session's pool)."""
    async with _backend_store(request.param, tmp_path, pg_schema_pool) as store:
        yield store


@pytest.fixture(params=["memory", "sqlite", "postgresql", "mongodb", "memservice"])
async def every_store(
    request: pytest.FixtureRequest, tmp_path: Path, pg_schema_pool: SchemaPool | None
) -> AsyncIterator[Store]:
    """An open, empty store of every driver (MongoDB: a fresh database, dropped after)."""
    async with _backend_store(request.param, tmp_path, pg_schema_pool) as store:
        yield store


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An open, empty store: the reference driver and the embedded default."""
    async with _backend_store(request.param, tmp_path) as opened:
        yield opened


class _backend_store:  # noqa: N801 - used like a function
    def __init__(self, backend: str, tmp_path: Path, pool: SchemaPool | None = None) -> None:
        self.backend, self.tmp_path, self.pool = backend, tmp_path, pool
        self.schema: AbstractAsyncContextManager[str] | None = None
        self.store: Store | None = None

    async def __aenter__(self) -> Store:
        options: dict[str, Any] = {}
        self.mongo: tuple[str, str] | None = None
        if self.backend in ("memory", "memservice"):
            url = f"{self.backend}://"
        elif self.backend == "mongodb":
            from threadkeep_contract_tests import require_service

            server = require_service("THREADKEEP_TEST_MONGODB_URL", "MongoDB")
            name = f"tk_agui_{uuid.uuid4().hex[:16]}"
            scheme, _, rest = server.partition("://")
            hosts, _, path = rest.partition("/")
            query = path.partition("?")[2]
            url = f"{scheme}://{hosts}/{name}" + (f"?{query}" if query else "")
            self.mongo = (server, name)
        elif self.backend == "sqlite":
            url = f"sqlite+aiosqlite:///{self.tmp_path / 'agui.db'}"
        else:
            from threadkeep_contract_tests import require_service
            from threadkeep_sql.testing import temporary_schema

            server = require_service(POSTGRES_ENV, "PostgreSQL")
            self.schema = (
                self.pool.schema() if self.pool else temporary_schema(server, prefix="tk_agui")
            )
            url = await self.schema.__aenter__()
        self.store = await open_store(url, **options).open()
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        assert self.store is not None
        await self.store.close()
        if self.schema is not None:
            await self.schema.__aexit__(None, None, None)
        if self.mongo is not None:
            from pymongo import AsyncMongoClient

            client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(self.mongo[0])
            try:
                await client.drop_database(self.mongo[1])
            finally:
                await client.close()


class ScriptedAgent:
    """An inner agent whose run is an async generator function of the input."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.inputs: list[RunAgentInput] = []

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        self.inputs.append(input)
        async for event in self.script(input):
            yield event


class Kit:
    """Builders and readers the tests share."""

    Agent = ScriptedAgent

    @staticmethod
    def run_input(
        thread_id: str = "thread-1", run_id: str = "run-1", messages: Sequence[Any] = ()
    ) -> RunAgentInput:
        if not messages:
            messages = [UserMessage(id=f"user-{run_id}", content=f"hello from {run_id}")]
        return RunAgentInput(
            thread_id=thread_id,
            run_id=run_id,
            messages=list(messages),
            tools=[],
            context=[],
            state={},
            forwarded_props={},
        )

    @staticmethod
    def text(message_id: str, deltas: Sequence[str]) -> list[BaseEvent]:
        return [
            TextMessageStartEvent(message_id=message_id, role="assistant"),
            *[TextMessageContentEvent(message_id=message_id, delta=d) for d in deltas],
            TextMessageEndEvent(message_id=message_id),
        ]

    @staticmethod
    def started(input: RunAgentInput) -> RunStartedEvent:
        return RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)

    @staticmethod
    def finished(input: RunAgentInput) -> RunFinishedEvent:
        return RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)

    @staticmethod
    async def history(
        store: Store, user_id: str, thread_id: str, run_id: str | None = None
    ) -> list[Message]:
        """Every visible message of the chat (of one run if given), oldest first."""
        chat = await store.find_chat(user_id, thread_id)
        if chat is None:
            return []
        pages: list[list[Message]] = []
        cursor = None
        while True:
            page = await store.list_messages(
                chat.chat_id,
                limit=200,
                cursor=cursor,
                message_filter=MessageFilter(run_id=run_id) if run_id else None,
            )
            pages.append(page.items)
            if not page.has_more:
                return [m for items in reversed(pages) for m in items]
            cursor = page.next_cursor


@pytest.fixture
def kit() -> type[Kit]:
    """Builders of inputs and events, the scripted agent, a history reader."""
    return Kit


@pytest.fixture
def realdata() -> Path:
    """The shared real-data directory, or a skip when it is absent."""
    if not REALDATA.is_dir():
        pytest.skip(f"real data not present at {REALDATA}")
    return REALDATA
