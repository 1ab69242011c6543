"""Idempotency: retries return the stored record and never duplicate."""

from __future__ import annotations

import asyncio
from typing import ClassVar
from uuid import uuid4

import pytest

from threadkeep import IdempotencyConflict, Message, Reasoning, Store, ToolCall

from ._base import ContractBase
from ._helpers import body_of

__all__ = ["IdempotencyTests"]


class IdempotencyTests(ContractBase):
    """An ``agui_id`` already stored returns the stored message, or conflicts."""

    contract_area: ClassVar[str] = "Idempotency"

    @pytest.mark.asyncio
    async def test_retry_returns_stored_message(self, store: Store) -> None:
        """Appending the same message again returns the stored one and stores nothing."""
        chat = await store.create_chat("u-idem", "t-retry")
        message = Message(role="user", agui_id="msg-1", content="hello", metadata={"k": [1, 2]})
        first = await store.append_message(chat.chat_id, message)
        again = await store.append_message(chat.chat_id, message)
        assert (again.message_id, again.seq) == (first.message_id, first.seq)
        rows = await self.raw_messages(store, chat.chat_id)
        assert [r.message_id for r in rows] == [first.message_id]

    @pytest.mark.asyncio
    async def test_retry_with_new_generated_ids_is_equal(self, store: Store) -> None:
        """A retry rebuilt by the client (new message/tool-call ids) still counts as equal."""
        chat = await store.create_chat("u-idem", "t-rebuilt")

        def build() -> Message:
            call = ToolCall(agui_id="call-1", name="lookup", arguments='{"q": 1}')
            return Message(role="assistant", agui_id="msg-2", content="", tool_calls=[call])

        first = await store.append_message(chat.chat_id, build())
        again = await store.append_message(chat.chat_id, build())
        assert again.message_id == first.message_id
        assert again.tool_calls[0].tool_call_id == first.tool_calls[0].tool_call_id
        assert len(await self.raw_messages(store, chat.chat_id)) == 1

    @pytest.mark.asyncio
    async def test_same_agui_id_different_payload_conflicts(self, store: Store) -> None:
        """The same ``agui_id`` with another payload raises ``IdempotencyConflict``."""
        chat = await store.create_chat("u-idem", "t-conflict")
        stored = await store.append_message(
            chat.chat_id, Message(role="user", agui_id="msg-3", content="v1")
        )
        for changed in (
            Message(role="user", agui_id="msg-3", content="v2"),
            Message(role="assistant", agui_id="msg-3", content="v1"),
            Message(role="user", agui_id="msg-3", content="v1", metadata={"x": 1}),
        ):
            with pytest.raises(IdempotencyConflict):
                await store.append_message(chat.chat_id, changed)
        rows = await self.raw_messages(store, chat.chat_id)
        assert [(r.message_id, r.content) for r in rows] == [(stored.message_id, "v1")]
        read = await store.get_message(stored.message_id)
        assert read.content == "v1"

    @pytest.mark.asyncio
    async def test_concurrent_retries_store_one_message(self, store: Store) -> None:
        """10 concurrent appends with one ``agui_id`` give one message, and all return it."""
        chat = await store.create_chat("u-idem", "t-concurrent")
        sends = [Message(role="user", agui_id="msg-4", content="once") for _ in range(10)]
        results = await asyncio.gather(*(store.append_message(chat.chat_id, m) for m in sends))
        assert len({m.message_id for m in results}) == 1
        assert len({m.seq for m in results}) == 1
        rows = await self.raw_messages(store, chat.chat_id)
        assert len(rows) == 1, f"{len(rows)} rows stored for one agui_id"
        assert rows[0].message_id == results[0].message_id

    @pytest.mark.asyncio
    async def test_agui_id_is_scoped_to_its_chat(self, store: Store) -> None:
        """One ``agui_id`` in two chats gives two messages."""
        one = await store.create_chat("u-idem", "t-scope-1")
        two = await store.create_chat("u-idem", "t-scope-2")
        a = await store.append_message(
            one.chat_id, Message(role="user", agui_id="same", content="1")
        )
        b = await store.append_message(
            two.chat_id, Message(role="user", agui_id="same", content="2")
        )
        assert a.message_id != b.message_id
        found = await store.get_message_by_agui_id(two.chat_id, "same")
        assert found is not None
        assert found.content == "2"

    @pytest.mark.asyncio
    async def test_batch_retry_writes_nothing_new(self, store: Store) -> None:
        """Retrying a whole batch returns the stored messages; a repeat inside a batch too."""
        chat = await store.create_chat("u-idem", "t-batch")
        batch = [Message(role="user", agui_id=f"b{i}", content=f"c{i}") for i in range(4)]
        first = await store.append_messages(chat.chat_id, batch)
        again = await store.append_messages(chat.chat_id, [*batch, batch[0]])
        assert [m.message_id for m in again] == [m.message_id for m in first] + [
            first[0].message_id
        ]
        assert len(await self.raw_messages(store, chat.chat_id)) == 4
        mixed = [
            Message(role="user", agui_id="b9", content="x"),
            Message(role="user", agui_id="b9", content="y"),
        ]
        with pytest.raises(IdempotencyConflict):
            await store.append_messages(chat.chat_id, mixed)
        assert len(await self.raw_messages(store, chat.chat_id)) == 4

    @pytest.mark.asyncio
    async def test_retry_returns_equal_body(self, store: Store) -> None:
        """The message a retry returns equals what was written (nothing merged or lost)."""
        chat = await store.create_chat("u-idem", "t-body")
        message = Message(role="assistant", agui_id="m", content="text", block_id="b", step="s")
        first = await store.append_message(chat.chat_id, message)
        again = await store.append_message(
            chat.chat_id, message.model_copy(update={"message_id": uuid4()})
        )
        assert body_of(again) == body_of(first)

    @pytest.mark.asyncio
    async def test_nested_retries_are_idempotent(self, store: Store) -> None:
        """A tool call or reasoning re-sent with its ``agui_id`` is stored once, or conflicts."""
        chat = await store.create_chat("u-idem", "t-nested")
        holder = await store.append_message(chat.chat_id, Message(role="assistant"))
        call = ToolCall(agui_id="tc-1", name="search", arguments='{"q":"x"}')
        first = await store.append_tool_call(holder.message_id, call)
        again = await store.append_tool_call(
            holder.message_id, call.model_copy(update={"tool_call_id": uuid4()})
        )
        assert again.tool_call_id == first.tool_call_id
        with pytest.raises(IdempotencyConflict):
            await store.append_tool_call(
                holder.message_id, call.model_copy(update={"arguments": "{}"})
            )
        thought = Reasoning(agui_id="r-1", content="think")
        kept = await store.append_reasoning(holder.message_id, thought)
        assert (
            await store.append_reasoning(holder.message_id, thought)
        ).reasoning_id == kept.reasoning_id
        with pytest.raises(IdempotencyConflict):
            await store.append_reasoning(
                holder.message_id, Reasoning(agui_id="r-1", content="other")
            )
        read = await store.get_message(holder.message_id)
        assert [c.agui_id for c in read.tool_calls] == ["tc-1"]
        assert [r.agui_id for r in read.reasonings] == ["r-1"]
        (row,) = await self.raw_messages(store, chat.chat_id)
        assert len(row.body["tool_calls"]) == 1
        assert len(row.body["reasonings"]) == 1
