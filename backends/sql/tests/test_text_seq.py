"""A message row whose ``seq`` SQLite stores as text (issue 12, left item b).

SQLite's columns are dynamically typed: an outside tool can store ``'x3'`` in the integer
``seq`` column. Such a row sorts above every integer, so the keyset comparison of a page
(``seq < :before``) used to leave it out of every page, ``threadkeep check`` included,
without a word. It is damage like any other: reads report it (``CorruptRecord`` naming the
column ``seq``, or ``Page.corrupt`` under ``corrupt_records="skip"``), and the chat's
other messages page exactly as before.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from threadkeep import CorruptRecord, Message
from threadkeep_contract_tests import walk_past_damage
from threadkeep_sql import SqlStore

TEXT_SEQ = "x3"
"""What the outside tool writes into ``seq``: text that is not an integer literal (SQLite
would convert ``'3'`` back to an integer in an INTEGER column)."""


async def _seeded(url: str) -> tuple[list[Message], Message]:
    async with SqlStore(url) as store:
        chat = await store.create_chat("u-text-seq", "t")
        stored = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"m{i}") for i in range(6)]
        )
    return stored, stored[3]


def _damage(path: Path, bad: Message) -> None:
    assert bad.chat_id is not None
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "UPDATE messages SET seq = ? WHERE chat_id = ? AND seq = ?",
            (TEXT_SEQ, bad.chat_id.hex, bad.seq),
        )
        conn.commit()
        [(kind,)] = conn.execute("SELECT typeof(seq) FROM messages WHERE seq = ?", (TEXT_SEQ,))
    assert kind == "text"


async def test_a_text_seq_is_reported_never_hidden(tmp_path: Path) -> None:
    path = tmp_path / "text-seq.db"
    url = f"sqlite+aiosqlite:///{path}"
    stored, bad = await _seeded(url)
    _damage(path, bad)
    chat_id = bad.chat_id
    assert chat_id is not None
    async with SqlStore(url) as store:
        with pytest.raises(CorruptRecord) as caught:
            await store.list_messages(chat_id)
        assert caught.value.chat_id == chat_id
        assert caught.value.column == "seq"
        after = await store.append_message(chat_id, Message(role="user", content="after"))
        assert after.seq == stored[-1].seq + 1  # the text seq is not taken for the highest
    async with SqlStore(url, corrupt_records="skip") as store:
        messages, corrupt = await walk_past_damage(store, chat_id, limit=2)
        assert [m.content for m in messages] == ["m0", "m1", "m2", "m4", "m5", "after"]
        assert [(c.chat_id, c.column) for c in corrupt] == [(chat_id, "seq")]
        # A filtered page goes the SQLAlchemy way, not the one-hop SQLite path: the same.
        filtered = await store.list_messages(chat_id, message_filter={"roles": ["user"]})
        assert [m.content for m in filtered.items] == ["m0", "m1", "m2", "m4", "m5", "after"]
        assert [c.column for c in filtered.corrupt] == ["seq"]
