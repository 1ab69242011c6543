"""Content fidelity on MongoDB: operator-like keys, NUL, big integers, exact timestamps."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from threadkeep import ChatFilter, Message, Step, ToolCall
from threadkeep_mongodb import MongoStore

OPERATOR_KEYS = {"$where": "1", "a.b": 2}


async def test_operator_like_metadata_keys_round_trip(store: MongoStore, raw_db: Any) -> None:
    chat = await store.create_chat("u-ops", "t-ops", metadata=OPERATOR_KEYS)
    metadata = {**OPERATOR_KEYS, "$set": {"x.y": {"$gt": 1}}, "nested": [{"$in": ["$x"]}]}
    stored = await store.append_message(
        chat.chat_id, Message(role="user", content="hi", metadata=metadata)
    )

    assert (await store.get_chat(chat.chat_id)).metadata == OPERATOR_KEYS
    assert (await store.get_message(stored.message_id)).metadata == metadata
    (listed,) = (await store.list_messages(chat.chat_id)).items
    assert listed.metadata == metadata
    assert list(listed.metadata) == list(metadata), "key order is kept too"

    doc = await raw_db["messages"].find_one({"_id": stored.message_id})
    assert json.loads(doc["body"])["metadata"] == metadata, "stored as JSON text, not BSON keys"
    assert "$where" not in doc
    assert "a" not in doc


async def test_operator_like_values_are_values(store: MongoStore) -> None:
    """A filter value that looks like an operator matches only itself."""
    await store.create_chat("u-ops", "t-1", agent_id="plain")
    tricky = await store.create_chat("u-ops", "t-2", agent_id="$ne", name="a.*(")
    found = await store.list_chats(ChatFilter(agent_id="$ne"))
    assert [c.chat_id for c in found.items] == [tricky.chat_id]
    by_keyword = await store.list_chats(ChatFilter(keyword=".*("))
    assert [c.chat_id for c in by_keyword.items] == [tricky.chat_id]
    assert (await store.list_chats(ChatFilter(keyword="a.b"))).items == []


async def test_nul_and_unusual_text_round_trip(store: MongoStore) -> None:
    # Ids with control characters are refused (issue 12); names and content keep NUL.
    chat = await store.create_chat("u-nul", "t-nul", name="na\x00me")
    text = "a\x00b\x00\x00 中文 🎉 \u202e \ufeff \\u0000"
    message = Message(
        role="assistant",
        content=text,
        metadata={"k\x00ey": "v\x00", "big": 2**80, "float": 0.1 + 0.2, "neg0": -0.0},
        tool_calls=[ToolCall(name="f", arguments='{"a": "\\u0000", "b":1}', agui_id="c\x00")],
    )
    stored = await store.append_message(chat.chat_id, message)
    got = await store.get_message(stored.message_id)
    assert got.content == text
    assert got.metadata == message.metadata
    assert str(got.metadata["neg0"]) == "-0.0"
    assert got.tool_calls[0].arguments == message.tool_calls[0].arguments
    assert (await store.get_tool_call_by_agui_id(chat.chat_id, "c\x00")) is not None
    assert (await store.find_chat("u-nul", "t-nul")) is not None
    assert [c.name for c in (await store.list_chats(ChatFilter(keyword="A\x00M"))).items] == [
        "na\x00me"
    ]


async def test_timestamps_keep_microseconds(store: MongoStore) -> None:
    chat = await store.create_chat("u-ts", "t-ts")
    when = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    stored = await store.append_message(
        chat.chat_id, Message(role="user", content="x", created_at=when)
    )
    assert (await store.get_message(stored.message_id)).created_at == when
    (step,) = await store.save_steps(
        [Step(chat_id=chat.chat_id, stack_id="s", type="llm", created_at=when)]
    )
    assert (await store.get_step(step.step_id)).created_at == when
