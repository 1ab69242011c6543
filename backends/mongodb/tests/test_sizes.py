"""Size limits: a 40 MiB chat of 1 MiB messages, and a single 16 MiB message (issue 5)."""

from __future__ import annotations

from typing import Any

import pytest

from threadkeep import Message, PayloadTooLarge, Reasoning, ToolCall
from threadkeep_mongodb import MongoStore

MIB = 1024 * 1024


def _mib_text(i: int) -> str:
    """1 MiB of text that differs per message (so a mix-up between messages shows)."""
    stamp = f"<{i:04d}>"
    return (stamp * (MIB // len(stamp) + 1))[:MIB]


async def test_forty_one_mib_messages_store_and_page(store: MongoStore, raw_db: Any) -> None:
    chat = await store.create_chat("u-big", "t-40mib")
    sent = [Message(role="user", content=_mib_text(i), agui_id=f"m{i}") for i in range(40)]
    for start in range(0, 40, 8):  # batches of 8 MiB
        await store.append_messages(chat.chat_id, sent[start : start + 8])

    seen: list[Message] = []
    cursor = None
    while True:
        page = await store.list_messages(chat.chat_id, limit=7, cursor=cursor)
        seen = page.items + seen
        if not page.has_more:
            break
        cursor = page.next_cursor
    assert [m.agui_id for m in seen] == [m.agui_id for m in sent]
    assert [m.seq for m in seen] == list(range(1, 41))
    assert all(got.content == want.content for got, want in zip(seen, sent, strict=True))

    docs = await raw_db["messages"].find({"chat_id": chat.chat_id}).to_list(None)
    assert len(docs) == 40, "one document per message"
    assert all(isinstance(d["body"], str) for d in docs), "1 MiB bodies stay inline"
    assert await raw_db["chats"].count_documents({}) == 1


async def test_sixteen_mib_message_is_accepted(store: MongoStore, raw_db: Any) -> None:
    chat = await store.create_chat("u-big", "t-16mib")
    content = "é" * (8 * MIB)  # 16 MiB of UTF-8 in 8 Mi characters
    stored = await store.append_message(chat.chat_id, Message(role="user", content=content))
    assert len(stored.content.encode()) == store.max_message_bytes

    got = await store.get_message(stored.message_id)
    assert got.content == content
    (listed,) = (await store.list_messages(chat.chat_id)).items
    assert listed.content == content

    doc = await raw_db["messages"].find_one({"_id": stored.message_id})
    assert "body" not in doc, "an oversized body goes to chunks"
    assert doc["body_chunks"] >= 4
    assert await raw_db["chunks"].count_documents({"body_id": doc["body_id"]}) == doc["body_chunks"]


async def test_sixteen_mib_split_over_nested_fields(store: MongoStore) -> None:
    chat = await store.create_chat("u-big", "t-16mib-nested")
    quarter = "q" * (4 * MIB)
    message = Message(
        role="assistant",
        content=quarter,
        tool_calls=[ToolCall(name="f", arguments=quarter, content=quarter)],
        reasonings=[Reasoning(content=quarter)],
    )
    stored = await store.append_message(chat.chat_id, message)
    got = await store.get_tool_call(stored.tool_calls[0].tool_call_id)
    assert got.arguments == quarter
    assert got.content == quarter
    assert (await store.get_message(stored.message_id)).reasonings[0].content == quarter


async def test_over_sixteen_mib_is_refused_and_nothing_written(
    store: MongoStore, raw_db: Any
) -> None:
    chat = await store.create_chat("u-big", "t-too-big")
    small = Message(role="user", content="before")
    huge = Message(role="user", content="x" * (16 * MIB + 1))
    with pytest.raises(PayloadTooLarge):
        await store.append_messages(chat.chat_id, [small, huge])
    assert await raw_db["messages"].count_documents({}) == 0
    assert await raw_db["chunks"].count_documents({}) == 0


async def test_large_body_replaced_by_small_and_back(store: MongoStore, raw_db: Any) -> None:
    chat = await store.create_chat("u-big", "t-rewrite")
    big = "b" * (13 * MIB)
    stored = await store.append_message(chat.chat_id, Message(role="user", content=big))
    first_body = (await raw_db["messages"].find_one({"_id": stored.message_id}))["body_id"]

    small = await store.update_message(stored.message_id, content="small now")
    assert small.content == "small now"
    assert small.revision == 1
    assert await raw_db["chunks"].count_documents({}) == 0, "old chunks are removed"

    again = await store.update_message(stored.message_id, content=big + "!")
    assert (await store.get_message(stored.message_id)).content == big + "!"
    doc = await raw_db["messages"].find_one({"_id": stored.message_id})
    assert "body" not in doc
    assert doc["body_id"] != first_body
    assert again.revision == 2
    assert await raw_db["chunks"].count_documents({}) == doc["body_chunks"]
