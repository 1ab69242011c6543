"""PostgreSQL backends killed while a write is in flight: the write fails typed, whole or absent.

A test connection holds the chat's row lock, so the store's write is provably in flight
(blocked on the lock, inside its statement or transaction) when the test terminates its
backend (``pg_terminate_backend``, what a server restart or an OOM kill does to it). No
sleep races anything: the test waits for the server to report the write waiting on its
lock. Then: the call raises ``BackendUnavailable``, nothing of it is stored, and the next
write on the same store succeeds, right after the last stored seq.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from threadkeep import BackendUnavailable, Message, Step
from threadkeep_sql import SqlStore

from .conftest import asyncpg_dsn

_BLOCKED = "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"


async def _kill_while_blocked(
    url: str, schema: str, chat_id: Any, write: Callable[[], Awaitable[Any]]
) -> BaseException:
    """Run ``write`` with the chat row locked, kill its backend once it waits; return its error."""
    admin = await asyncpg.connect(asyncpg_dsn(url))
    try:
        lock = admin.transaction()
        await lock.start()
        await admin.execute(
            f'SELECT 1 FROM "{schema}".chats WHERE chat_id = $1 FOR UPDATE', chat_id
        )
        task = asyncio.ensure_future(write())
        async with asyncio.timeout(120):  # a hang guard: the write reaches the lock
            while not (blocked := await admin.fetch(_BLOCKED, admin.get_server_pid())):
                assert not task.done(), task
                await asyncio.sleep(0.02)
        for row in blocked:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", row["pid"])
        await lock.rollback()
    finally:
        await admin.close()
    outcome = (await asyncio.gather(task, return_exceptions=True))[0]
    assert isinstance(outcome, BaseException), f"the write succeeded: {outcome!r}"
    return outcome


def _batch(tag: str, size: int = 3, **fields: Any) -> list[Message]:
    return [Message(role="user", content=f"{tag}-{i}", **fields) for i in range(size)]


def write_of_kind(
    store: Any, chat_id: Any, kind: str, tag: str, *, load_size: int
) -> Callable[[], Awaitable[Any]]:
    """The write ``kind`` (``append``, ``load``, ``end_run`` of run ``r1``) of a few messages."""
    if kind == "append":
        return lambda: store.append_messages(chat_id, _batch(tag))
    if kind == "load":
        return lambda: store.load_messages(chat_id, _batch(tag, load_size))
    step = Step(chat_id=chat_id, run_id="r1", stack_id="s", type="llm")
    messages = _batch(tag, run_id="r1")
    return lambda: store.end_run(
        chat_id, "r1", owner="w", status="complete", messages=messages, steps=[step]
    )


@pytest.mark.parametrize("kind", ["append", "load", "end_run"])
async def test_a_write_whose_backend_is_killed_is_typed_and_absent(pg_schema, kind: str) -> None:
    url, schema = pg_schema
    async with SqlStore(url, schema=schema) as store:
        chat = await store.create_chat("u", "t")
        await store.append_messages(chat.chat_id, _batch("before"))
        if kind == "end_run":
            await store.start_run(chat.chat_id, "r1", owner="w")
        write = write_of_kind(store, chat.chat_id, kind, "killed", load_size=50)
        error = await _kill_while_blocked(url, schema, chat.chat_id, write)
        assert isinstance(error, BackendUnavailable), repr(error)
        stored = await store.scan_messages(chat.chat_id, limit=1000)
        assert [m.content for m in stored] == [f"before-{i}" for i in range(3)]
        if kind == "end_run":
            assert await store.scan_steps(chat.chat_id) == []
            assert (await store.get_run(chat.chat_id, "r1")).status == "active"
        after = await store.append_messages(chat.chat_id, _batch("after"))
        assert [m.seq for m in after] == [stored[-1].seq + 1 + i for i in range(3)]
