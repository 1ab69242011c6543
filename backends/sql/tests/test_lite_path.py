"""SQLite's one-hop path: every connection's pragmas, one hand-off per operation, typed errors.

aiosqlite runs each call on the connection's own thread; ``threadkeep_sql._lite`` runs a
whole operation there in one hand-off (``aiosqlite.Connection._execute``, which every
aiosqlite call goes through). These tests count the hand-offs of the operations that take
that path (a behaviour, not a timing), check that the connections it uses are configured
as documented (WAL, ``synchronous=NORMAL``, the busy timeout), and that errors on it are
``ThreadkeepError``s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from threadkeep import BackendUnavailable, ChatFilter, Conflict, Message, Step, Store
from threadkeep_sql import SqlStore
from threadkeep_sql._engine import BUSY_TIMEOUT_MS
from threadkeep_sql._lite import LiteRunner


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'lite.db'}") as opened:
        yield opened


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Count hand-offs to aiosqlite connection threads from now on; call it to read."""
    count = [0]
    execute = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return await execute(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)

    def read() -> int:
        value, count[0] = count[0], 0
        return value

    return read


async def _one_hop(
    hops: Callable[[], int], call: Callable[[], Awaitable[Any]], wanted: int = 1
) -> Any:
    hops()
    result = await call()
    assert hops() == wanted
    return result


async def test_reads_and_writes_on_the_path_take_one_hop_each(
    store: Store, hops: Callable[[], int]
) -> None:
    chat = await _one_hop(hops, lambda: store.create_chat("u", "t"))
    await store.create_chat("u", "other")
    message = Message(role="user", content="hello", agui_id="m-1")
    stored = await _one_hop(hops, lambda: store.append_message(chat.chat_id, message))
    assert (await _one_hop(hops, lambda: store.get_chat(chat.chat_id))).chat_id == chat.chat_id
    found = await _one_hop(hops, lambda: store.find_chat("u", "t"))
    assert found is not None
    assert found.chat_id == chat.chat_id
    page = await _one_hop(hops, lambda: store.list_chats(ChatFilter(user_id="u")))
    assert [c.thread_id for c in page.items] == ["t", "other"]
    assert len((await _one_hop(hops, lambda: store.list_messages(chat.chat_id))).items) == 1
    got = await _one_hop(hops, lambda: store.get_message(stored.message_id))
    assert got == stored
    by_agui = await _one_hop(hops, lambda: store.get_message_by_agui_id(chat.chat_id, "m-1"))
    assert by_agui == stored
    last = await _one_hop(hops, lambda: store.get_last_messages([chat.chat_id]))
    assert last == {chat.chat_id: stored}
    update = store.update_message(stored.message_id, content="hello again")
    changed = await _one_hop(hops, lambda: update, 2)  # the read of the stored message, the replace
    assert (await store.get_message(stored.message_id)).content == "hello again"
    assert changed.revision == stored.revision + 1
    renamed = await _one_hop(hops, lambda: store.rename_chat(chat.chat_id, "named"), 2)
    assert renamed.name == "named"
    assert renamed.revision > chat.revision
    step = Step(chat_id=chat.chat_id, stack_id="s-1", type="tool")
    saved = await _one_hop(hops, lambda: store.save_steps([step]), 2)  # get_chat, then save
    assert [s.step_id for s in saved] == [step.step_id]


async def test_a_live_key_taken_meanwhile_returns_the_live_chat(store: Store) -> None:
    first = await store.create_chat("u", "t", name="first")
    again = await store.create_chat("u", "t", name="second")
    assert again.chat_id == first.chat_id
    assert again.name == "first"


@pytest.mark.parametrize("where", ["file", "memory"])
async def test_restoring_over_a_taken_live_key_names_the_conflict(
    tmp_path: Path, where: str
) -> None:
    url = "sqlite+aiosqlite:///" + (":memory:" if where == "memory" else str(tmp_path / "k.db"))
    async with SqlStore(url) as store:
        old = await store.create_chat("u", "t")
        await store.delete_chat(old.chat_id)
        await store.create_chat("u", "t")
        with pytest.raises(Conflict, match="delete it before restoring this one"):
            await store.restore_chat(old.chat_id)


async def test_every_connection_runs_wal_and_synchronous_normal(store: Store) -> None:
    db = store.driver.db
    await store.create_chat("u", "t")  # a write: the path's write connection
    for write in (False, True):
        async with db.sqlite_driver(write=write) as driver:
            mode = await driver.execute_fetchall("PRAGMA journal_mode")
            sync = await driver.execute_fetchall("PRAGMA synchronous")
            busy = await driver.execute_fetchall("PRAGMA busy_timeout")
        assert list(mode) == [("wal",)]
        assert list(sync) == [(1,)]  # NORMAL
        assert list(busy) == [(BUSY_TIMEOUT_MS,)]
    async with db.transaction() as conn:  # SQLAlchemy's connections: the same pragmas
        raw = (await conn.get_raw_connection()).driver_connection
        assert list(await raw.execute_fetchall("PRAGMA synchronous")) == [(1,)]


async def test_the_read_runner_has_no_sqlalchemy_connection(store: Store) -> None:
    async with store.driver.db.runner() as run:
        assert isinstance(run, LiteRunner)
        with pytest.raises(RuntimeError, match="use read"):
            _ = run.conn


async def test_errors_on_the_path_are_typed_and_leave_the_store_usable(
    store: Store, tmp_path: Path
) -> None:
    chat = await store.create_chat("u", "t")
    stored = await store.append_message(chat.chat_id, Message(role="user", content="x"))
    outside = sqlite3.connect(tmp_path / "lite.db")
    outside.execute("ALTER TABLE messages RENAME TO messages_away")
    outside.commit()
    with pytest.raises(BackendUnavailable, match="no such table"):
        await store.get_message(stored.message_id)
    with pytest.raises(BackendUnavailable, match="no such table"):
        await store.list_messages(chat.chat_id)
    outside.execute("ALTER TABLE messages_away RENAME TO messages")
    outside.commit()
    outside.close()
    assert await store.get_message(stored.message_id) == stored
    assert (await store.get_chat(chat.chat_id)).chat_id == chat.chat_id
