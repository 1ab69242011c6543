"""Concurrent writers: seqs are reserved atomically, creates are idempotent, no "locked"."""

from __future__ import annotations

import asyncio

from threadkeep import Message
from threadkeep_sql import SqlStore


async def test_50_concurrent_appends_get_50_distinct_increasing_seqs(store: SqlStore) -> None:
    chat = await store.create_chat("u", "busy")
    stored = await asyncio.gather(
        *(
            store.append_message(chat.chat_id, Message(role="user", content=f"m{i}"))
            for i in range(50)
        )
    )
    seqs = [m.seq for m in stored]
    assert len(set(seqs)) == 50
    page = await store.list_messages(chat.chat_id, limit=200)
    assert [m.seq for m in page.items] == sorted(seqs)
    assert sorted(m.content for m in page.items) == sorted(f"m{i}" for i in range(50))


async def test_concurrent_appends_from_two_stores_on_one_database(
    open_sql_store,
) -> None:
    # Two engines (as two processes would have): SQLite's in-process lock cannot help, so
    # BEGIN IMMEDIATE and the busy timeout must keep "database is locked" away.
    first, second = await open_sql_store(), await open_sql_store()
    chat = await first.create_chat("u", "shared")
    writes = [
        (first if i % 2 else second).append_messages(
            chat.chat_id, [Message(role="user", content=f"{i}-{j}") for j in range(2)]
        )
        for i in range(30)
    ]
    batches = await asyncio.gather(*writes)
    seqs = [m.seq for batch in batches for m in batch]
    assert len(set(seqs)) == 60
    for batch in batches:  # a batch's messages are consecutive in the chat's order
        assert [m.seq for m in batch] == sorted(m.seq for m in batch)
    page = await second.list_messages(chat.chat_id, limit=200)
    assert len(page.items) == 60


async def test_20_concurrent_creates_for_one_key_give_one_chat(store: SqlStore) -> None:
    chats = await asyncio.gather(*(store.create_chat("u", "same-key") for _ in range(20)))
    assert len({c.chat_id for c in chats}) == 1
    page = await store.list_chats()
    assert [c.chat_id for c in page.items] == [chats[0].chat_id]


async def test_concurrent_creates_across_two_stores(open_sql_store) -> None:
    first, second = await open_sql_store(), await open_sql_store()
    chats = await asyncio.gather(
        *((first if i % 2 else second).create_chat("u", "k") for i in range(20))
    )
    assert len({c.chat_id for c in chats}) == 1


async def test_concurrent_retries_of_one_agui_id_store_one_message(store: SqlStore) -> None:
    chat = await store.create_chat("u", "retries")
    stored = await asyncio.gather(
        *(
            store.append_message(chat.chat_id, Message(role="user", content="x", agui_id="a"))
            for _ in range(20)
        )
    )
    assert len({m.message_id for m in stored}) == 1
    assert len((await store.list_messages(chat.chat_id)).items) == 1


async def test_deleted_chat_frees_its_key(store: SqlStore) -> None:
    chat = await store.create_chat("u", "k")
    await store.delete_chat(chat.chat_id)
    again = await store.create_chat("u", "k")
    assert again.chat_id != chat.chat_id
    assert again.seq is not None
    assert chat.seq is not None
    assert again.seq > chat.seq
