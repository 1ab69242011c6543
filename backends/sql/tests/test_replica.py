"""Reads from a streaming-replication standby (``read_url=``), and reading one's own writes.

Needs ``THREADKEEP_TEST_POSTGRES_STANDBY_URL`` (``bash .ci/services/standby.sh start``): a
real standby of the test primary made with ``pg_basebackup -R``. The lag test pauses the
standby's replay (``pg_wal_replay_pause()``, granted to the test role by standby.sh) and
always resumes it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

import asyncpg
import pytest
import sqlalchemy as sa

from threadkeep import InvalidArgument, Message
from threadkeep_contract_tests import require_service
from threadkeep_sql import SqlStore

from .conftest import asyncpg_dsn

STANDBY_ENV = "THREADKEEP_TEST_POSTGRES_STANDBY_URL"


def standby_url() -> str:
    return require_service(STANDBY_ENV, "a PostgreSQL standby (bash .ci/services/standby.sh start)")


@pytest.fixture
async def replicated(pg_schema: tuple[str, str]) -> AsyncIterator[SqlStore]:
    url, schema = pg_schema
    store = await SqlStore(url, schema=schema, read_url=standby_url(), read_wait=0.3).open()
    yield store
    await store.close()


async def test_reads_go_to_the_standby(replicated: SqlStore) -> None:
    async with replicated.driver.db.read() as conn:
        assert (await conn.execute(sa.text("SELECT pg_is_in_recovery()"))).scalar() is True
    async with replicated.driver.db.transaction() as conn:
        assert (await conn.execute(sa.text("SELECT pg_is_in_recovery()"))).scalar() is False


async def test_a_caller_reads_its_own_writes(replicated: SqlStore) -> None:
    chat = await replicated.create_chat("u", "t")
    for i in range(30):
        stored = await replicated.append_message(chat.chat_id, Message(role="user", content=str(i)))
        page = await replicated.list_messages(chat.chat_id, limit=1)
        assert [m.message_id for m in page.items] == [stored.message_id]
        assert (await replicated.get_chat(chat.chat_id)).revision == i + 1
    router = replicated.driver.db._router
    assert router is not None
    assert router.standby_reads > 0


async def test_a_lagging_standby_sends_reads_to_the_primary(replicated: SqlStore) -> None:
    chat = await replicated.create_chat("u", "t")
    await replicated.list_messages(chat.chat_id)
    router = replicated.driver.db._router
    assert router is not None
    conn = await asyncpg.connect(asyncpg_dsn(standby_url()))
    try:
        await conn.execute("SELECT pg_wal_replay_pause()")
        before = router.primary_reads
        stored = await replicated.append_message(chat.chat_id, Message(role="user", content="x"))
        page = await replicated.list_messages(chat.chat_id)
        assert [m.message_id for m in page.items] == [stored.message_id]
        assert router.primary_reads == before + 1  # waited read_wait, then asked the primary
    finally:
        await conn.execute("SELECT pg_wal_replay_resume()")
        await conn.close()
    page = await replicated.list_messages(chat.chat_id)  # caught up again: the standby serves
    assert [m.message_id for m in page.items] == [stored.message_id]


async def test_read_url_options_are_checked() -> None:
    url = "postgresql+asyncpg://u:p@127.0.0.1/db"
    with pytest.raises(InvalidArgument, match="PostgreSQL URL"):
        SqlStore(url, read_url="sqlite+aiosqlite:///x.db")
    with pytest.raises(InvalidArgument, match="read_wait"):
        SqlStore(f"{url}?read_wait=soon")
    with pytest.raises(InvalidArgument, match="read_wait"):
        SqlStore(url, read_wait=-1)
    with pytest.raises(InvalidArgument, match="PostgreSQL options"):
        SqlStore("sqlite+aiosqlite:///x.db", partitions=4)
    with pytest.raises(InvalidArgument, match="given twice"):
        SqlStore(f"{url}?partitions=4", partitions=8)
    with pytest.raises(InvalidArgument, match="search_path"):
        SqlStore(f"{url}?pooler=transaction", schema="s")
    with pytest.raises(InvalidArgument, match="pooler"):
        SqlStore(f"{url}?pooler=session")
    with pytest.raises(InvalidArgument, match="read_consistency"):
        SqlStore(url, read_consistency="eventual")
    store = SqlStore(f"{url}?partitions=4&read_url={quote(url, safe='')}&pooler=transaction")
    assert store.driver._scale.partitions == 4
    assert store.driver._scale.read_url is not None
    assert store.driver._scale.read_url.host == "127.0.0.1"


async def test_strong_reads_see_other_instances_writes_session_reads_their_own(
    pg_schema: tuple[str, str],
) -> None:
    url, schema = pg_schema
    options = {"schema": schema, "read_url": standby_url(), "read_wait": 0.3}
    async with (
        SqlStore(url, schema=schema) as writer,
        SqlStore(url, **options) as strong,
        SqlStore(url, read_consistency="session", **options) as session,
    ):
        chat = await writer.create_chat("u", "t")
        await strong.get_chat(chat.chat_id)
        await session.get_chat(chat.chat_id)  # both readers start caught up
        conn = await asyncpg.connect(asyncpg_dsn(standby_url()))
        try:
            await conn.execute("SELECT pg_wal_replay_pause()")
            stored = await writer.append_message(chat.chat_id, Message(role="user", content="x"))
            # strong: fenced on the primary's WAL position, so it falls back and sees it
            page = await strong.list_messages(chat.chat_id)
            assert [m.message_id for m in page.items] == [stored.message_id]
            # session: no write of its own since it last caught up: the (paused) standby
            assert (await session.list_messages(chat.chat_id)).items == []
            mine = await session.append_message(chat.chat_id, Message(role="user", content="y"))
            page = await session.list_messages(chat.chat_id)  # its own write: the primary
            assert [m.message_id for m in page.items] == [stored.message_id, mine.message_id]
        finally:
            await conn.execute("SELECT pg_wal_replay_resume()")
            await conn.close()
