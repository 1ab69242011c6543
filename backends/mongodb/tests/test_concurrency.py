"""Seq reservation and all-or-nothing batches under concurrent writers."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from threadkeep import Conflict, IdempotencyConflict, Message
from threadkeep_mongodb import MongoStore, _base

MakeStore = Any


async def _walk_seqs(store: MongoStore, chat_id: Any) -> list[int]:
    seqs: list[int] = []
    cursor = None
    while True:
        page = await store.list_messages(chat_id, limit=13, cursor=cursor)
        seqs = [m.seq or 0 for m in page.items] + seqs
        if not page.has_more:
            return seqs
        cursor = page.next_cursor


async def test_fifty_concurrent_appends_get_distinct_increasing_seqs(
    make_store: MakeStore,
) -> None:
    async with make_store() as one, make_store() as two:
        chat = await one.create_chat("u-conc", "t-50")
        sent = [Message(role="user", content=f"m{i}", agui_id=f"a{i}") for i in range(50)]
        stored = await asyncio.gather(
            *((one if i % 2 else two).append_message(chat.chat_id, m) for i, m in enumerate(sent))
        )
        seqs = sorted(m.seq or 0 for m in stored)
        assert len(set(seqs)) == 50
        assert await _walk_seqs(one, chat.chat_id) == seqs
        assert seqs == list(range(1, 51)), "transactions leave no gaps"


_PROCESS_WRITER = """
import asyncio, sys
from uuid import UUID
from threadkeep import Message
from threadkeep_mongodb import MongoStore

async def main(url, chat_id, name, writers):
    async with MongoStore(url) as store:
        async def one(n):
            for k in range(8):
                message = Message(role="user", content=f"{name}-{n}-{k}")
                await store.append_message(UUID(chat_id), message)
        await asyncio.gather(*(one(n) for n in range(writers)))

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""


async def test_four_processes_of_thirteen_writers_never_conflict(
    store: MongoStore, mongo_db: tuple[str, str]
) -> None:
    """Issue 12: 4 processes x 13 writers x 8 appends (416) on one chat all succeed."""
    chat = await store.create_chat("u-conc", "t-processes")
    url, _ = mongo_db
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _PROCESS_WRITER,
            url,
            str(chat.chat_id),
            f"p{p}",
            "13",
            stderr=asyncio.subprocess.PIPE,
        )
        for p in range(4)
    ]
    for proc in procs:
        _, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
    seqs = await _walk_seqs(store, chat.chat_id)
    assert seqs == list(range(1, 417)), "every append stored once, no gaps"


async def test_fifty_writers_appending_repeatedly_never_conflict(store: MongoStore) -> None:
    """Issue 12: 50 asyncio writers x 6 appends on one chat (300) all succeed."""
    chat = await store.create_chat("u-conc", "t-300")

    async def writer(n: int) -> None:
        for k in range(6):
            await store.append_message(chat.chat_id, Message(role="user", content=f"{n}-{k}"))

    await asyncio.gather(*(writer(n) for n in range(50)))
    seqs = await _walk_seqs(store, chat.chat_id)
    assert seqs == list(range(1, 301))


async def test_concurrent_batches_never_interleave(store: MongoStore) -> None:
    chat = await store.create_chat("u-conc", "t-batches")
    batches = [[Message(role="user", content=f"{b}-{i}") for i in range(4)] for b in range(10)]
    results = await asyncio.gather(*(store.append_messages(chat.chat_id, b) for b in batches))
    for stored in results:
        seqs = [m.seq or 0 for m in stored]
        assert seqs == list(range(seqs[0], seqs[0] + 4)), "a batch gets consecutive seqs"


async def test_concurrent_creates_return_one_chat(make_store: MakeStore) -> None:
    async with make_store() as one, make_store() as two:
        chats = await asyncio.gather(
            *((one if i % 2 else two).create_chat("u-conc", "same") for i in range(20))
        )
        assert len({c.chat_id for c in chats}) == 1
        other = await asyncio.gather(*(one.create_chat("u-conc", f"t{i}") for i in range(10)))
        assert len({c.seq for c in other}) == 10


async def test_batch_is_all_or_nothing_on_a_conflict(store: MongoStore, raw_db: Any) -> None:
    chat = await store.create_chat("u-conc", "t-atomic")
    first = await store.append_message(chat.chat_id, Message(role="user", content="x"))
    clash = Message(role="user", content="y", message_id=first.message_id)
    with pytest.raises(Conflict):
        await store.append_messages(
            chat.chat_id, [Message(role="user", content="ok"), clash, Message(role="user")]
        )
    await store.append_messages(
        chat.chat_id,
        [Message(role="user", content="new"), Message(role="user", agui_id="k", content="1")],
    )
    changed = [Message(role="user", content="lost"), Message(role="user", agui_id="k", content="2")]
    with pytest.raises(IdempotencyConflict):
        await store.append_messages(chat.chat_id, changed)
    docs = await raw_db["messages"].find({}).to_list(None)
    assert sorted(d["seq"] for d in docs) == [1, 2, 3]
    assert (await raw_db["chats"].find_one({"_id": chat.chat_id}))["next_seq"] == 4


async def test_write_conflict_beyond_retries_is_a_conflict(
    store: MongoStore, mongo_server: str, mongo_db: tuple[str, str], monkeypatch: Any
) -> None:
    """A transaction holding the chat document makes an append conflict; retries end.

    They end only after ``CONFLICT_RETRY_SECONDS`` (the server's transaction lifetime by
    default): shortened here, since the holder below never lets go.
    """
    chat = await store.create_chat("u-conc", "t-held")
    monkeypatch.setattr(_base, "CONFLICT_RETRY_SECONDS", 0.3)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_server, uuidRepresentation="standard"
    )
    try:
        async with client.start_session() as session:
            await session.start_transaction()
            await client[mongo_db[1]]["chats"].update_one(
                {"_id": chat.chat_id}, {"$inc": {"revision": 1}}, session=session
            )
            with pytest.raises(Conflict, match="kept conflicting"):
                await store.append_message(chat.chat_id, Message(role="user", content="x"))
            await session.abort_transaction()
    finally:
        await client.close()
    stored = await store.append_message(chat.chat_id, Message(role="user", content="x"))
    assert stored.seq == 1


async def test_without_transactions_a_failed_batch_undoes_itself(
    make_store: MakeStore, raw_db: Any
) -> None:
    async with make_store(use_transactions=False) as store:
        assert store.capabilities.transactions is False
        assert type(store.driver).capabilities.transactions is True
        chat = await store.create_chat("u-conc", "t-standalone")
        first = await store.append_message(chat.chat_id, Message(role="user", content="x"))
        clash = Message(role="user", content="y", message_id=first.message_id)
        with pytest.raises(Conflict):
            await store.append_messages(
                chat.chat_id, [Message(role="user", content="ok" * 8_000_000), clash]
            )
        assert await raw_db["messages"].count_documents({}) == 1
        assert await raw_db["chunks"].count_documents({}) == 0
        stored = await asyncio.gather(
            *(store.append_message(chat.chat_id, Message(role="user")) for _ in range(20))
        )
        assert len({m.seq for m in stored}) == 20
