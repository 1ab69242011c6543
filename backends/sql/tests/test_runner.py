"""Runners: statements compiled once and run on asyncpg directly keep SQLAlchemy's semantics.

Bind and result processors of the column types (``KeyText``'s NUL escaping) are applied,
asyncpg's errors map through ``map_native_errors``, and a statement cut off mid-flight
(a cancellation) leaves no broken connection behind.
"""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from threadkeep import BackendUnavailable, InvalidArgument
from threadkeep_sql import SqlStore
from threadkeep_sql._runner import PgRunner, RawStatement
from threadkeep_sql._schema import chats

ODD = "a\x00b\\0c\\"


async def test_key_columns_escape_on_the_way_in_and_out(store: SqlStore) -> None:
    # Ids refuse control characters (issue 12); a name is a key column that keeps them.
    chat = await store.create_chat("u", "t", name=ODD)
    await store.create_chat("u", "t2", name="a")
    stmt = sa.select(chats.c.name, chats.c.chat_id).where(chats.c.name == sa.bindparam("user_id"))
    async with store.driver.db.runner() as run:
        if store.driver.db.dialect == "postgresql":
            assert isinstance(run, PgRunner)
        rows = await run.all(stmt, {"user_id": ODD})
        first = await run.first(stmt, {"user_id": ODD})
        value = await run.scalar(stmt, {"user_id": ODD})
        stored = await run.scalar(sa.text("SELECT name FROM chats WHERE name <> 'a'"))
    assert [tuple(row) for row in rows] == [(ODD, chat.chat_id)]
    assert first is not None
    assert tuple(first) == (ODD, chat.chat_id)
    assert value == ODD
    assert stored == "a\\0b\\\\0c\\\\"  # what the column holds: the escaped form


def test_compiled_statements_carry_their_literals() -> None:
    from sqlalchemy.dialects.postgresql import asyncpg

    stmt = sa.select(chats.c.seq).where(
        chats.c.user_id == sa.bindparam("u"), chats.c.status == "active"
    )
    raw = RawStatement.compile(stmt, asyncpg.dialect())
    assert raw.sql.count("$") == 2
    assert raw.args({"u": "x\x00"}) == ["x\\0", "active"]
    with pytest.raises(KeyError):
        raw.args({})
    with pytest.raises(ValueError, match="expanding IN"):
        RawStatement.compile(
            sa.select(chats.c.seq).where(chats.c.seq.in_([1, 2])), asyncpg.dialect()
        )


async def test_a_cancelled_statement_leaves_no_broken_connection(pg_schema) -> None:
    url, schema = pg_schema
    async with SqlStore(url, schema=schema, pool_size=1) as store:
        chat = await store.create_chat("u", "t")
        with pytest.raises(BackendUnavailable):
            async with store.driver.db.runner() as run:
                await asyncio.wait_for(run.scalar(sa.select(sa.func.pg_sleep(5))), 0.1)
        assert store.driver.db._held == []  # discarded, not kept for the next operation
        for _ in range(3):
            assert (await store.get_chat(chat.chat_id)).chat_id == chat.chat_id
        task = asyncio.create_task(store.list_messages(chat.chat_id))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await store.list_messages(chat.chat_id)).items == []


async def test_asyncpg_errors_map_to_the_tree(pg_schema) -> None:
    url, schema = pg_schema
    async with SqlStore(url, schema=schema) as store:
        with pytest.raises(InvalidArgument, match="cannot store a value"):
            async with store.driver.db.runner() as run:
                await run.scalar(sa.text("SELECT CAST(:x AS integer)"), {"x": "abc"})
        with pytest.raises(InvalidArgument, match="cannot store a value"):
            async with store.driver.db.read() as conn:  # the SQLAlchemy path agrees
                await conn.execute(sa.text("SELECT CAST(:x AS integer)"), {"x": "abc"})
        with pytest.raises(BackendUnavailable):
            async with store.driver.db.runner() as run:
                await run.scalar(sa.text("SELECT * FROM no_such_table"))
        assert await store.list_chats() is not None


def _kept(store: SqlStore) -> list[dict[str, object]]:
    prepared = store.driver.db._prepared
    assert prepared is not None
    return [dict(kept) for kept in prepared.values()]


async def test_hot_statements_are_kept_prepared_per_connection(pg_schema) -> None:
    url, schema = pg_schema
    async with SqlStore(url, schema=schema, pool_size=1) as store:
        chat = await store.create_chat("u", "t")
        await store.append_message(chat.chat_id, {"role": "user", "content": "hi"})
        for _ in range(3):
            page = await store.list_messages(chat.chat_id)
            assert [m.content for m in page.items] == ["hi"]
        (kept,) = _kept(store)  # one held connection, its statements prepared once
        pages = [sql for sql in kept if "ORDER BY messages.seq DESC" in str(sql)]
        assert len(pages) == 1
        statement = kept[pages[0]]
        await store.list_messages(chat.chat_id)
        assert _kept(store)[0][pages[0]] is statement  # reused, not prepared again


async def test_a_kept_statement_survives_a_schema_change(pg_schema) -> None:
    url, schema = pg_schema
    async with SqlStore(url, schema=schema, pool_size=1) as store:
        await store.create_chat("u", "t", name="n")
        stmt = sa.select(chats.c.name).where(chats.c.user_id == sa.bindparam("user_id"))
        sql = store.driver.db._compiled.get(stmt).sql
        async with store.driver.db.runner() as run:
            assert await run.scalar(stmt, {"user_id": "u"}) == "n"
            first = _kept(store)[0][sql]
            # The result type changes under the prepared statement ("cached plan must not
            # change result type"), then the server forgets every prepared statement.
            await run.conn.exec_driver_sql("ALTER TABLE chats ALTER COLUMN name TYPE varchar(900)")
            assert await run.scalar(stmt, {"user_id": "u"}) == "n"
            second = _kept(store)[0][sql]
            assert second is not first  # prepared again
            await run.conn.exec_driver_sql("DEALLOCATE ALL")
            assert [tuple(r) for r in await run.all(stmt, {"user_id": "u"})] == [("n",)]
            assert _kept(store)[0][sql] is not second
        assert (await store.list_chats()).items[0].name == "n"


async def test_a_statement_cache_turned_off_keeps_no_statements(pg_schema) -> None:
    url, schema = pg_schema
    sep = "&" if "?" in url else "?"
    async with SqlStore(f"{url}{sep}prepared_statement_cache_size=0", schema=schema) as store:
        chat = await store.create_chat("u", "t")
        await store.append_message(chat.chat_id, {"role": "user", "content": "hi"})
        assert [m.content for m in (await store.list_messages(chat.chat_id)).items] == ["hi"]
        assert store.driver.db._prepared is None


async def test_past_the_limit_statements_run_unkept(pg_schema, monkeypatch) -> None:
    from threadkeep_sql import _runner

    url, schema = pg_schema
    monkeypatch.setattr(_runner, "MAX_PREPARED", 1)
    async with SqlStore(url, schema=schema, pool_size=1) as store:
        async with store.driver.db.runner() as run:
            assert await run.scalar(sa.text("SELECT 1")) == 1
            assert await run.scalar(sa.text("SELECT 2")) == 2  # not kept: Connection.fetch
            assert await run.scalar(sa.text("SELECT 1")) == 1
        (kept,) = _kept(store)
        assert list(kept) == ["SELECT 1"]
