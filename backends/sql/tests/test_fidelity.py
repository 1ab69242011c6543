"""Content fidelity on both engines: NUL characters, 16 MiB bodies, exact tool arguments."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from threadkeep import DEFAULT_MAX_MESSAGE_BYTES, Message, PayloadTooLarge, ToolCall
from threadkeep_sql import SqlStore
from threadkeep_sql._schema import messages


async def test_nul_characters_round_trip_exactly(store: SqlStore) -> None:
    # Ids with control characters are refused (issue 12); names and content keep NUL.
    chat = await store.create_chat("user", "thread", name="n\x00me")
    content = "a\x00b\x00\x00c \u4e2d\u6587 \U0001f600 \x01\x1f"
    call = ToolCall(name="f\x00", arguments='{"x": "\\u0000", "y": "\x00"}')
    stored = await store.append_message(
        chat.chat_id,
        Message(role="assistant", content=content, tool_calls=[call], metadata={"k\x00": "\x00"}),
    )
    page = await store.list_messages(chat.chat_id)
    (read,) = page.items
    assert read == stored
    assert read.content == content
    assert read.tool_calls[0].arguments == call.arguments
    assert read.metadata == {"k\x00": "\x00"}
    again = await store.get_chat(chat.chat_id)
    assert (again.user_id, again.thread_id, again.name) == ("user", "thread", "n\x00me")


async def test_16_mib_body_round_trips_exactly(store: SqlStore) -> None:
    chat = await store.create_chat("u", "big")
    # Multi-byte characters throughout and a NUL every KiB, exactly at the limit in UTF-8
    # bytes (each NUL is six characters of JSON, so the body stays inside the envelope).
    unit = "\u00e9\U0001f600\u4e2d" * 56 + "\x00" + "ab"  # 2 + 4 + 3 = 9 bytes x 56 + 3
    content = unit * (DEFAULT_MAX_MESSAGE_BYTES // len(unit.encode()))
    content += "x" * (DEFAULT_MAX_MESSAGE_BYTES - len(content.encode()))
    assert len(content.encode()) == DEFAULT_MAX_MESSAGE_BYTES
    stored = await store.append_message(chat.chat_id, Message(role="user", content=content))
    read = await store.get_message(stored.message_id)
    assert read.content == content
    (paged,) = (await store.list_messages(chat.chat_id)).items
    assert paged.content == content
    async with store.driver.db.read() as conn:
        length = (await conn.execute(sa.select(sa.func.length(messages.c.body)))).scalar_one()
    assert length >= len(content)


async def test_over_the_limit_writes_nothing(store: SqlStore) -> None:
    chat = await store.create_chat("u", "too-big")
    with pytest.raises(PayloadTooLarge):
        await store.append_message(
            chat.chat_id, Message(role="user", content="x" * (DEFAULT_MAX_MESSAGE_BYTES + 1))
        )
    assert (await store.list_messages(chat.chat_id)).items == []


async def test_timestamps_read_back_tz_aware_utc(store: SqlStore) -> None:
    chat = await store.create_chat("u", "t")
    stored = await store.append_message(chat.chat_id, Message(role="user", content="hi"))
    read = await store.get_message(stored.message_id)
    again = await store.get_chat(chat.chat_id)
    for value in (read.created_at, read.updated_at, again.created_at, again.last_message_at):
        assert value is not None
        assert value.utcoffset() is not None
        assert value.utcoffset().total_seconds() == 0
    assert read.created_at == stored.created_at


async def test_empty_agui_id_is_an_id_and_none_is_not(store: SqlStore) -> None:
    chat = await store.create_chat("u", "ids")
    empty = await store.append_message(chat.chat_id, Message(role="user", content="e", agui_id=""))
    plain = await store.append_messages(
        chat.chat_id, [Message(role="user", content="n") for _ in range(2)]
    )
    again = await store.append_messages(
        chat.chat_id,
        [Message(role="user", content="e", agui_id=""), Message(role="user", content="m")],
    )
    assert again[0].message_id == empty.message_id
    assert len({m.message_id for m in [empty, *plain, again[1]]}) == 4
    assert len((await store.list_messages(chat.chat_id)).items) == 4
