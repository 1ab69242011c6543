"""``threadkeep_sql.testing.SchemaPool`` (the contract suite's schemas) never hands out leftovers.

A schema returned with rows comes back empty with its sequence restarted; one a test changed
(a column, an index, a privilege, an older revision) or never migrated is dropped, not reused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from threadkeep import Message
from threadkeep_sql import SqlStore
from threadkeep_sql.testing import SchemaPool

from .conftest import asyncpg_dsn, postgres_url


@pytest.fixture
async def pool() -> AsyncIterator[SchemaPool]:
    made = SchemaPool(postgres_url(), prefix="tk_pool_test")
    yield made
    await made.close()


async def _sql(schema: str, statement: str) -> list[asyncpg.Record]:
    """Run ``statement`` with ``S.`` naming ``schema``; return its rows (none: ``[]``)."""
    conn = await asyncpg.connect(asyncpg_dsn(postgres_url()))
    try:
        sql = statement.replace("S.", f'"{schema}".')
        if ";" in sql:
            await conn.execute(sql)
            return []
        return list(await conn.fetch(sql))
    finally:
        await conn.close()


async def _migrated_with_a_chat(schema: str) -> None:
    async with SqlStore(postgres_url(), schema=schema) as store:
        chat = await store.create_chat("u", "t")
        await store.append_message(chat.chat_id, Message(role="user", content="left over"))


async def test_a_returned_schema_comes_back_empty_with_its_sequence_restarted(
    pool: SchemaPool,
) -> None:
    first = await pool.take()
    await _migrated_with_a_chat(first)
    await pool.give_back(first)
    again = await pool.take()
    assert again == first  # reused: the point of the pool
    for table in ("chats", "messages", "message_refs", "settings"):
        assert await _sql(again, f"SELECT * FROM S.{table}") == [], table
    versions = await _sql(again, "SELECT version_num FROM S.threadkeep_alembic_version")
    assert len(versions) == 1  # still at the head: the store opens it without migrating
    async with SqlStore(postgres_url(), schema=again) as store:
        chat = await store.create_chat("u", "t")
        assert [c.chat_id for c in (await store.list_chats({"user_id": "u"})).items] == [
            chat.chat_id
        ]
    (row,) = await _sql(again, "SELECT seq FROM S.chats")
    assert row["seq"] == 1  # as in a new schema
    await pool.give_back(again)


@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE S.chats ADD COLUMN extra int",
        "CREATE INDEX ix_extra ON S.messages (role)",
        "DROP INDEX S.ix_chats_user_seq",
        "CREATE TABLE S.extra (x int)",
        "REVOKE ALL ON S.messages FROM PUBLIC; GRANT SELECT ON S.messages TO PUBLIC",
        "UPDATE S.threadkeep_alembic_version SET version_num = '0004'",
    ],
)
async def test_a_schema_a_test_changed_is_dropped_not_reused(pool: SchemaPool, change: str) -> None:
    first = await pool.take()
    await _migrated_with_a_chat(first)
    await _sql(first, change)
    await pool.give_back(first)
    gone = await _sql(first, f"SELECT 1 FROM pg_namespace WHERE nspname = '{first}'")
    assert gone == []
    assert await pool.take() != first


async def test_a_schema_never_migrated_is_dropped(pool: SchemaPool) -> None:
    first = await pool.take()
    await pool.give_back(first)  # the test opened no store: no tables
    assert await pool.take() != first


async def test_the_context_manager_yields_a_store_url_and_gives_the_schema_back(
    pool: SchemaPool,
) -> None:
    async with pool.schema() as url, SqlStore(url) as store:
        await store.create_chat("u", "t")
    async with pool.schema() as again:
        assert again == url
        async with SqlStore(again) as store:
            assert (await store.list_chats({"user_id": "u"})).items == []
