"""Nested tool calls and reasonings: append, update, look up, concurrency."""

from __future__ import annotations

import asyncio
from typing import ClassVar
from uuid import uuid4

import pytest

from threadkeep import (
    InvalidArgument,
    Message,
    MessageNotFound,
    Reasoning,
    Store,
    ToolCall,
)

from ._base import ContractBase

__all__ = ["NestedTests"]


class NestedTests(ContractBase):
    """Tool calls and reasonings live in their message and are found by id and agui_id."""

    contract_area: ClassVar[str] = "Tool calls & reasonings"

    @pytest.mark.asyncio
    async def test_tool_call_lifecycle(self, store: Store) -> None:
        """A tool call appended, updated with its result, and found by id and by agui_id."""
        chat = await store.create_chat("u-nested", "t-tool")
        holder = await store.append_message(chat.chat_id, Message(role="assistant", agui_id="m"))
        call = await store.append_tool_call(
            holder.message_id,
            ToolCall(
                agui_id="call-1", name="weather", arguments='{"city":"Oslo"}', status="active"
            ),
        )
        assert call.message_id == holder.message_id
        done = await store.update_tool_call(call.tool_call_id, content="-3°C", status="complete")
        assert (done.content, done.status, done.arguments) == (
            "-3°C",
            "complete",
            '{"city":"Oslo"}',
        )
        by_id = await store.get_tool_call(call.tool_call_id)
        by_agui = await store.get_tool_call_by_agui_id(chat.chat_id, "call-1")
        assert by_agui is not None
        assert by_id == by_agui == done
        message = await store.get_message(holder.message_id)
        assert message.tool_calls == [done]
        assert await store.get_tool_call_by_agui_id(chat.chat_id, "missing") is None
        with pytest.raises(MessageNotFound):
            await store.get_tool_call(uuid4())
        with pytest.raises(InvalidArgument):
            await store.update_tool_call(call.tool_call_id, agui_id="renamed")

    @pytest.mark.asyncio
    async def test_reasoning_lifecycle(self, store: Store) -> None:
        """A reasoning appended, updated, and found by id and by agui_id."""
        chat = await store.create_chat("u-nested", "t-reason")
        holder = await store.append_message(chat.chat_id, Message(role="assistant"))
        thought = await store.append_reasoning(
            holder.message_id, Reasoning(agui_id="r-1", content="step 1", status="active")
        )
        done = await store.update_reasoning(
            thought.reasoning_id, content="step 1\nstep 2", encrypted_value="e==", status="complete"
        )
        assert await store.get_reasoning(thought.reasoning_id) == done
        assert await store.get_reasoning_by_agui_id(chat.chat_id, "r-1") == done
        assert (await store.get_message(holder.message_id)).reasonings == [done]
        (row,) = await self.raw_messages(store, chat.chat_id)
        assert row.body["reasonings"][0]["content"] == "step 1\nstep 2"

    @pytest.mark.asyncio
    async def test_inline_tool_calls_are_found(self, store: Store) -> None:
        """Tool calls written inside an appended message are found by id and agui_id."""
        chat = await store.create_chat("u-nested", "t-inline")
        calls = [ToolCall(agui_id=f"c{i}", name="f", arguments=str(i)) for i in range(3)]
        stored = await store.append_message(
            chat.chat_id, Message(role="assistant", tool_calls=calls)
        )
        for call in calls:
            assert (await store.get_tool_call(call.tool_call_id)).arguments == call.arguments
            found = await store.get_tool_call_by_agui_id(chat.chat_id, call.agui_id or "")
            assert found is not None
            assert found.tool_call_id == call.tool_call_id
        assert [c.tool_call_id for c in stored.tool_calls] == [c.tool_call_id for c in calls]

    @pytest.mark.asyncio
    async def test_newest_holder_wins_agui_lookup(self, store: Store) -> None:
        """When several messages hold a tool call with one agui_id, the newest is returned."""
        chat = await store.create_chat("u-nested", "t-newest")
        for index in range(3):
            call = ToolCall(agui_id="shared", arguments=f"v{index}")
            await store.append_message(chat.chat_id, Message(role="assistant", tool_calls=[call]))
        found = await store.get_tool_call_by_agui_id(chat.chat_id, "shared")
        assert found is not None
        assert found.arguments == "v2"

    @pytest.mark.asyncio
    async def test_concurrent_nested_appends_all_kept(self, store: Store) -> None:
        """10 concurrent tool-call appends to one message all survive (no lost update)."""
        chat = await store.create_chat("u-nested", "t-concurrent")
        holder = await store.append_message(chat.chat_id, Message(role="assistant"))
        calls = [ToolCall(agui_id=f"c{i}", arguments=f'{{"i":{i}}}') for i in range(10)]
        await asyncio.gather(*(store.append_tool_call(holder.message_id, c) for c in calls))
        read = await store.get_message(holder.message_id)
        assert sorted(c.agui_id or "" for c in read.tool_calls) == sorted(
            c.agui_id or "" for c in calls
        )
        (row,) = await self.raw_messages(store, chat.chat_id)
        assert len(row.body["tool_calls"]) == 10

    @pytest.mark.asyncio
    async def test_nested_records_of_hidden_messages_are_hidden(self, store: Store) -> None:
        """Tool calls and reasonings of a hidden message are not found; appending to it fails."""
        chat = await store.create_chat("u-nested", "t-hidden")
        holder = await store.append_message(
            chat.chat_id,
            Message(
                role="assistant",
                tool_calls=[ToolCall(agui_id="c")],
                reasonings=[Reasoning(agui_id="r")],
            ),
        )
        await store.delete_messages(chat.chat_id, [holder.message_id])
        with pytest.raises(MessageNotFound):
            await store.get_tool_call(holder.tool_calls[0].tool_call_id)
        with pytest.raises(MessageNotFound):
            await store.get_reasoning(holder.reasonings[0].reasoning_id)
        assert await store.get_tool_call_by_agui_id(chat.chat_id, "c") is None
        assert await store.get_reasoning_by_agui_id(chat.chat_id, "r") is None
        with pytest.raises(MessageNotFound):
            await store.append_tool_call(holder.message_id, ToolCall(agui_id="late"))
        with pytest.raises(MessageNotFound):
            await store.update_message(holder.message_id, content="edit")

    @pytest.mark.asyncio
    async def test_update_message_keeps_identity(self, store: Store) -> None:
        """``update_message`` changes fields, bumps revision, keeps id, seq and agui_id."""
        chat = await store.create_chat("u-nested", "t-update")
        stored = await store.append_message(
            chat.chat_id, Message(role="assistant", agui_id="a", in_progress=True)
        )
        updated = await store.update_message(stored.message_id, content="done", in_progress=False)
        assert (updated.message_id, updated.seq, updated.agui_id) == (
            stored.message_id,
            stored.seq,
            "a",
        )
        assert updated.revision > stored.revision
        assert (await store.get_message(stored.message_id)).content == "done"
        with pytest.raises(InvalidArgument):
            await store.update_message(stored.message_id, seq=99)
        results = await asyncio.gather(
            *(store.update_message(stored.message_id, metadata={"n": i}) for i in range(5))
        )
        assert len({r.revision for r in results}) == 5, "concurrent updates must serialize"
