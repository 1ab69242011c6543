"""Schema creation through Alembic: idempotent reopen, matches the query metadata, secret kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from threadkeep import InvalidCursor, Message
from threadkeep_sql import SqlStore
from threadkeep_sql._engine import Database, normalize_url
from threadkeep_sql._migrate import _config, current_revision, head_revision, upgrade_to_head
from threadkeep_sql._schema import metadata


async def test_open_migrates_to_head_and_reopen_is_a_no_op(open_sql_store) -> None:
    first = await open_sql_store()
    chat = await first.create_chat("u", "t")
    await first.append_message(chat.chat_id, Message(role="user", content="kept"))
    await first.close()
    second = await open_sql_store()
    async with second.driver.db.transaction() as conn:
        assert await conn.run_sync(current_revision) == head_revision()
        await conn.run_sync(upgrade_to_head)  # a third run changes nothing
    (message,) = (await second.list_messages(chat.chat_id)).items
    assert message.content == "kept"


async def test_migrated_schema_matches_the_query_metadata(store: SqlStore) -> None:
    def diff(conn: sa.Connection) -> list[object]:
        context = MigrationContext.configure(conn, opts={"compare_type": False})
        found = compare_metadata(context, metadata)
        return [d for d in found if "threadkeep_alembic_version" not in repr(d)]

    async with store.driver.db.read() as conn:
        assert await conn.run_sync(diff) == []


async def test_cursor_secret_persists_across_two_opens_of_one_file(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'secret.db'}"
    async with SqlStore(url) as first:
        chat = await first.create_chat("u", "t")
        await first.append_messages(
            chat.chat_id, [Message(role="user", content=str(i)) for i in range(5)]
        )
        cursor = (await first.list_messages(chat.chat_id, limit=2)).next_cursor
    assert cursor is not None
    async with SqlStore(url) as second:
        page = await second.list_messages(chat.chat_id, limit=2, cursor=cursor)
        assert [m.content for m in page.items] == ["1", "2"]
    async with SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'other.db'}") as other:
        other_chat = await other.create_chat("u", "t")
        try:
            await other.list_messages(other_chat.chat_id, cursor=cursor)
        except InvalidCursor:
            pass
        else:
            raise AssertionError("a cursor signed by another store's secret was accepted")


async def test_memory_url_works_and_is_private(tmp_path: Path) -> None:
    async with SqlStore("sqlite+aiosqlite:///:memory:") as first:
        chat = await first.create_chat("u", "t")
        assert (await first.get_chat(chat.chat_id)).chat_id == chat.chat_id
        async with SqlStore("sqlite+aiosqlite:///:memory:") as second:
            assert (await second.list_chats()).items == []


async def test_an_older_schema_is_migrated_on_open(engine_url) -> None:
    url, options = engine_url
    database = Database.create(normalize_url(url), schema=options.get("schema"))
    try:
        async with database.transaction() as conn:
            await conn.run_sync(lambda sync: command.upgrade(_config(sync), "0001"))
            assert await conn.run_sync(current_revision) == "0001"
    finally:
        await database.dispose()
    async with SqlStore(url, **options) as store:
        async with store.driver.db.read() as conn:
            assert await conn.run_sync(current_revision) == head_revision()
        chat = await store.create_chat("u", "t")
        assert await store.primitives.index_archived_ids(chat.chat_id, [chat.chat_id]) == 1


async def test_relative_file_url_opens_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with SqlStore("sqlite+aiosqlite:///./threadkeep.db") as store:
        await store.create_chat("u", "t")
    assert (tmp_path / "threadkeep.db").is_file()
