"""``load_messages`` ignores the store-assigned fields of the messages it is given.

The bulk path writes a caller's ``Message`` as it is (no copy): the chat, the seq, the
revision and the times come from the store, on the bulk primitive (SQLite here) and on
the ``insert_messages`` fallback (the memory driver) alike, as ``append_messages`` does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest

from threadkeep import Message, open_store


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_store_assigned_fields_of_the_input_are_not_kept(kind: str, tmp_path: Path) -> None:
    url = "memory://" if kind == "memory" else f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    async with open_store(url) as store:
        chat = await store.create_chat("u", "t")
        when = datetime(2020, 1, 2, tzinfo=UTC)
        given = Message(
            role="user",
            agui_id="a",
            content="hello",
            chat_id=uuid4(),
            seq=99,
            revision=7,
            created_at=when,
            updated_at=when,
            deleted_at=when,
        )
        prepared = store.prepare(given)
        report = await store.load_messages(chat.chat_id, [given, prepared.message])
        assert (report.created, report.present) == (1, 1)
        again = Message(role="user", agui_id="b", content="x", chat_id=uuid4(), seq=5)
        await store.load_messages(chat.chat_id, [store.prepare(again)])
        page = await store.list_messages(chat.chat_id, limit=10)
        first, second = page.items
        assert (first.chat_id, second.chat_id) == (chat.chat_id, chat.chat_id)
        assert first.seq is not None
        assert second.seq is not None
        assert first.seq < second.seq < 99
        assert (first.revision, first.deleted_at, first.created_at) == (0, None, when)
        assert first.updated_at is not None
        assert first.updated_at != when
        assert first.message_id == given.message_id
        assert given.seq == 99  # the caller's message is not changed
