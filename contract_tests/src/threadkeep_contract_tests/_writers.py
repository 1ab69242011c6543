"""Many concurrent writers on one store: per-caller results and errors, order per chat.

Drivers may coalesce concurrent appends (group commit, as the SQL driver does on PostgreSQL);
what a caller sees must not change: its own stored message or its own error, nothing stored
twice, and each chat's messages in the order its callers' appends completed.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar
from uuid import uuid4

import pytest

from threadkeep import (
    ChatNotFound,
    IdempotencyConflict,
    InvalidContent,
    Message,
    Store,
)

from ._base import ContractBase

__all__ = ["ConcurrentWriterTests"]

WRITERS = 32
PER_WRITER = 6


class ConcurrentWriterTests(ContractBase):
    """Concurrent single-message appends from many callers."""

    contract_area: ClassVar[str] = "Concurrent writers"

    @pytest.mark.asyncio
    async def test_each_writer_gets_its_own_messages_in_order(self, store: Store) -> None:
        """32 writers over 4 chats: every result is the caller's, seqs follow each writer."""
        chats = [await store.create_chat("u-writers", f"t-{n}") for n in range(4)]

        async def writer(w: int) -> list[Message]:
            chat = chats[w % len(chats)]
            stored = []
            for n in range(PER_WRITER):
                message = Message(role="user", agui_id=f"w{w}-{n}", content=f"{w}:{n}")
                stored.append(await store.append_message(chat.chat_id, message))
            return stored

        results = await asyncio.gather(*(writer(w) for w in range(WRITERS)))
        for w, stored in enumerate(results):
            assert [m.content for m in stored] == [f"{w}:{n}" for n in range(PER_WRITER)]
            assert [m.agui_id for m in stored] == [f"w{w}-{n}" for n in range(PER_WRITER)]
            seqs = [m.seq or 0 for m in stored]
            assert seqs == sorted(seqs)
            assert 0 not in seqs
            assert {m.chat_id for m in stored} == {chats[w % len(chats)].chat_id}
        for chat in chats:
            rows = await self.raw_messages(store, chat.chat_id)
            assert len(rows) == WRITERS // len(chats) * PER_WRITER
            assert len({r.agui_id for r in rows}) == len(rows)
            assert [r.seq for r in rows] == sorted({r.seq for r in rows})
            by_seq = {r.seq: r for r in rows}
            for stored in results:
                for message in stored:
                    if message.chat_id == chat.chat_id:
                        assert by_seq[message.seq or 0].message_id == message.message_id

    @pytest.mark.asyncio
    async def test_a_failing_writer_fails_alone(self, store: Store) -> None:
        """Among concurrent appends, each bad one gets its own error; the others are stored."""
        chat = await store.create_chat("u-writers", "t-mixed")
        gone = await store.create_chat("u-writers", "t-gone")
        await store.delete_chat(gone.chat_id)
        await store.append_message(chat.chat_id, Message(role="user", content="first"))
        await store.append_message(chat.chat_id, Message(role="user", agui_id="dup", content="v1"))
        bad = {
            3: (gone.chat_id, Message(role="user", content="to a deleted chat")),
            7: (chat.chat_id, Message(role="user", agui_id="dup", content="v2")),
            11: (chat.chat_id, Message(role="user", content="lone \ud800")),
        }
        expected: dict[int, type[Exception]] = {
            3: ChatNotFound,
            7: IdempotencyConflict,
            11: InvalidContent,
        }

        async def one(n: int) -> Message:
            chat_id, message = bad.get(
                n, (chat.chat_id, Message(role="user", agui_id=f"ok-{n}", content=str(n)))
            )
            return await store.append_message(chat_id, message)

        outcomes = await asyncio.gather(*(one(n) for n in range(20)), return_exceptions=True)
        for n, outcome in enumerate(outcomes):
            if n in expected:
                assert isinstance(outcome, expected[n]), (n, outcome)
            else:
                assert isinstance(outcome, Message), (n, outcome)
                assert outcome.content == str(n)
        rows = await self.raw_messages(store, chat.chat_id)
        assert sorted(str(r.agui_id) for r in rows if r.agui_id) == sorted(
            ["dup"] + [f"ok-{n}" for n in range(20) if n not in bad]
        )
        assert [r.content for r in rows if r.agui_id == "dup"] == ["v1"]
        assert len(rows) == 2 + 20 - len(bad)

    @pytest.mark.asyncio
    async def test_concurrent_retries_store_one_message(self, store: Store) -> None:
        """The same append sent by 16 callers at once is stored once; all get that message."""
        chat = await store.create_chat("u-writers", "t-retries")
        others = [
            store.append_message(
                chat.chat_id, Message(role="user", agui_id=f"other-{n}", content="o")
            )
            for n in range(8)
        ]
        same = [
            store.append_message(
                chat.chat_id, Message(role="user", agui_id="same", content="s", message_id=uuid4())
            )
            for _ in range(16)
        ]
        results = await asyncio.gather(*same, *others)
        assert len({m.message_id for m in results[:16]}) == 1
        rows = await self.raw_messages(store, chat.chat_id)
        assert len(rows) == 9
        assert [r.agui_id for r in rows].count("same") == 1
