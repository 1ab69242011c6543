"""Boundaries and context: start over, compaction, windows."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest

from threadkeep import (
    ChatNotFound,
    IdempotencyConflict,
    InvalidArgument,
    Message,
    MessageKind,
    Role,
    Store,
    ToolCall,
)

from ._base import ContractBase
from ._helpers import walk_messages

__all__ = ["BoundaryTests", "assert_no_orphan_tool_results"]


def assert_no_orphan_tool_results(window: list[Message]) -> None:
    """Assert every tool result in a context window answers a call earlier in the window."""
    calls: set[str] = set()
    for message in window:
        if message.role is Role.TOOL:
            assert message.tool_call_ref in calls, (
                f"context holds tool result {message.content!r} whose call "
                f"{message.tool_call_ref!r} was cut off"
            )
        calls.update(c.agui_id for c in message.tool_calls if c.agui_id)


def _tool_turn(call_id: str) -> list[Message]:
    return [
        Message(role="user", content=f"ask {call_id}"),
        Message(
            role="assistant",
            tool_calls=[ToolCall(agui_id=call_id, name="lookup", arguments="{}")],
        ),
        Message(role="tool", tool_call_ref=call_id, content=f"result {call_id}"),
        Message(role="assistant", content=f"answer {call_id}"),
    ]


class BoundaryTests(ContractBase):
    """``start_over``, ``compact`` and ``context_messages``."""

    contract_area: ClassVar[str] = "Boundaries & context"

    @pytest.mark.asyncio
    async def test_start_over_is_idempotent(self, store: Store) -> None:
        """``start_over`` on an empty chat or right after a boundary adds nothing."""
        chat = await store.create_chat("u-bound", "t-idem")
        assert await store.start_over(chat.chat_id) is None
        assert await self.raw_messages(store, chat.chat_id) == []
        await store.append_message(chat.chat_id, Message(role="user", content="one"))
        first = await store.start_over(chat.chat_id)
        second = await store.start_over(chat.chat_id)
        assert first is not None
        assert second is not None
        assert first.kind is MessageKind.BOUNDARY
        assert second.message_id == first.message_id
        concurrent = await asyncio.gather(*(store.start_over(chat.chat_id) for _ in range(5)))
        assert {b.message_id for b in concurrent if b is not None} == {first.message_id}
        rows = await self.raw_messages(store, chat.chat_id)
        assert len(rows) == 2, "start_over repeated after a boundary added another marker"

    @pytest.mark.asyncio
    async def test_start_over_after_compaction_draws_a_line(self, store: Store) -> None:
        """``start_over`` right after ``compact`` draws a line: the summary leaves context.

        Only a "start over" line as the newest message makes ``start_over`` a no-op; a
        compaction boundary there still hands its summary to the model.
        """
        chat = await store.create_chat("u-bound", "t-after-compact")
        stored = await store.append_messages(
            chat.chat_id,
            [Message(role="user", content="my card is 4111"), Message(role="user", content="ok")],
        )
        summary = await store.compact(chat.chat_id, "user shared a card", stored[1].seq or 0)
        line = await store.start_over(chat.chat_id)
        assert line is not None
        assert line.message_id != summary.message_id, "start_over returned the compaction"
        assert line.boundary is not None
        assert line.boundary.reason == "start_over"
        assert line.seq is not None
        assert summary.seq is not None
        assert line.seq > summary.seq
        assert await store.context_messages(chat.chat_id) == []
        again = await store.start_over(chat.chat_id)
        assert again is not None
        assert again.message_id == line.message_id, "a second start_over added another line"
        assert len(await self.raw_messages(store, chat.chat_id)) == 4

    @pytest.mark.asyncio
    async def test_concurrent_start_over_draws_one_line(self, store: Store) -> None:
        """Concurrent ``start_over`` calls on a chat with new messages draw one boundary."""
        chat = await store.create_chat("u-bound", "t-race")
        await store.append_message(chat.chat_id, Message(role="user", content="one"))
        results = await asyncio.gather(*(store.start_over(chat.chat_id) for _ in range(8)))
        assert len({b.message_id for b in results if b is not None}) == 1
        assert len(await self.raw_messages(store, chat.chat_id)) == 2

    @pytest.mark.asyncio
    async def test_context_follows_last_boundary(self, store: Store) -> None:
        """Context holds only what follows the last boundary; history keeps everything."""
        chat = await store.create_chat("u-bound", "t-context")
        await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"a{i}") for i in range(3)]
        )
        await store.start_over(chat.chat_id)
        await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"b{i}") for i in range(3)]
        )
        await store.start_over(chat.chat_id)
        after = [Message(role="user", content="c0"), Message(role="assistant", content="c1")]
        await store.append_messages(chat.chat_id, after)
        context = await store.context_messages(chat.chat_id)
        assert [m.content for m in context] == ["c0", "c1"]
        assert all(m.kind is MessageKind.MESSAGE for m in context)
        history = await walk_messages(store, chat.chat_id, limit=3)
        kinds = [m.kind for m in history.items]
        assert len(history.items) == 10
        assert kinds.count(MessageKind.BOUNDARY) == 2
        assert [m.content for m in await store.context_messages(chat.chat_id, max_messages=1)] == [
            "c1"
        ]
        await store.start_over(chat.chat_id)
        assert await store.context_messages(chat.chat_id) == []

    @pytest.mark.asyncio
    async def test_compaction_summary_comes_first(self, store: Store) -> None:
        """After ``compact``, context is the summary, then the messages after ``upto_seq``."""
        chat = await store.create_chat("u-bound", "t-compact")
        stored = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"m{i}") for i in range(6)]
        )
        upto = stored[3].seq
        assert upto is not None
        summary = await store.compact(chat.chat_id, "summary of m0..m3 — 摘要", upto)
        assert summary.kind is MessageKind.BOUNDARY
        assert summary.boundary is not None
        assert (summary.boundary.reason, summary.boundary.upto_seq) == ("compaction", upto)
        await store.append_message(chat.chat_id, Message(role="user", content="m6"))
        context = await store.context_messages(chat.chat_id)
        assert [m.content for m in context] == ["summary of m0..m3 — 摘要", "m4", "m5", "m6"]
        assert context[0].message_id == summary.message_id
        again = await store.compact(chat.chat_id, "summary of m0..m3 — 摘要", upto)
        assert again.message_id == summary.message_id
        with pytest.raises(IdempotencyConflict):
            await store.compact(chat.chat_id, "another summary", upto)
        history = await walk_messages(store, chat.chat_id, limit=50)
        assert [m.content for m in history.items][:6] == [f"m{i}" for i in range(6)]

    @pytest.mark.asyncio
    async def test_compact_checks_upto_seq(self, store: Store) -> None:
        """``compact`` beyond the newest seq, below zero, or on an empty chat is refused."""
        chat = await store.create_chat("u-bound", "t-compact-bad")
        with pytest.raises(InvalidArgument):
            await store.compact(chat.chat_id, "nothing to summarize", 0)
        stored = await store.append_message(chat.chat_id, Message(role="user", content="x"))
        assert stored.seq is not None
        for bad in (stored.seq + 1, -1):
            with pytest.raises(InvalidArgument):
                await store.compact(chat.chat_id, "s", bad)
        assert len(await self.raw_messages(store, chat.chat_id)) == 1

    @pytest.mark.asyncio
    async def test_appended_compaction_follows_compact_rules(self, store: Store) -> None:
        """A compaction boundary given to ``append_message(s)`` obeys ``compact``'s rules.

        ``upto_seq`` missing, below the current cut, or beyond the newest seq stored
        before the batch raises ``InvalidArgument``, and nothing of the batch is written;
        a valid one is stored and sets the context like ``compact``.
        """
        chat = await store.create_chat("u-bound", "t-raw-compaction")
        stored = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"r{i}") for i in range(6)]
        )
        seqs = [m.seq or 0 for m in stored]
        first = await store.compact(chat.chat_id, "up to r3", seqs[3])
        rows = len(await self.raw_messages(store, chat.chat_id))

        def marker(upto: int | None, content: str = "s") -> dict[str, object]:
            return {
                "role": "system",
                "kind": "boundary",
                "boundary": {"reason": "compaction", "upto_seq": upto},
                "content": content,
            }

        for upto in (seqs[1], 0, seqs[5] + 100, None):
            with pytest.raises(InvalidArgument):
                await store.append_message(chat.chat_id, marker(upto))
            with pytest.raises(InvalidArgument):
                await store.append_messages(
                    chat.chat_id, [Message(role="user", content="x"), marker(upto)]
                )
        with pytest.raises(InvalidArgument):
            await store.append_messages(chat.chat_id, [marker(seqs[5]), marker(seqs[4])])
        assert len(await self.raw_messages(store, chat.chat_id)) == rows, "a refused batch wrote"
        await store.append_message(chat.chat_id, marker(seqs[4], "up to r4"))
        context = await store.context_messages(chat.chat_id)
        assert [m.content for m in context] == ["up to r4", "r5"]
        retry = await store.append_message(chat.chat_id, first)
        assert retry.message_id == first.message_id, "a retry of a stored boundary is a retry"

    @pytest.mark.asyncio
    @pytest.mark.threadkeep_capability("archive")
    async def test_retry_of_a_hidden_compaction_is_a_retry(self, store: Store) -> None:
        """Re-appending a stored compaction that was hidden returns it; rules not re-applied.

        Its ``upto_seq`` is now below the cut of a later compaction, so checked as a new
        boundary it would be refused. Core finds hidden messages only through the driver's
        ``scan_messages`` (an ``archive`` primitive); without it such a retry is checked
        like a new boundary, hence the capability.
        """
        chat = await store.create_chat("u-bound", "t-hidden-compaction")
        stored = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"r{i}") for i in range(6)]
        )
        seqs = [m.seq or 0 for m in stored]
        first = await store.compact(chat.chat_id, "up to r3", seqs[3])
        await store.compact(chat.chat_id, "up to r4", seqs[4])
        await store.delete_messages(chat.chat_id, [first.message_id])
        hidden = await store.append_messages(chat.chat_id, [first])
        assert hidden[0].message_id == first.message_id, "a hidden stored boundary is a retry"

    @pytest.mark.asyncio
    async def test_context_never_starts_with_orphan_tool_result(self, store: Store) -> None:
        """A context window never holds a tool result whose call was cut off."""
        chat = await store.create_chat("u-bound", "t-orphan")
        first = await store.append_messages(chat.chat_id, _tool_turn("call-1"))
        await store.append_messages(chat.chat_id, _tool_turn("call-2"))
        call_seq = first[1].seq
        assert call_seq is not None
        await store.compact(chat.chat_id, "summary up to the first call", call_seq)
        context = await store.context_messages(chat.chat_id)
        assert context[0].content == "summary up to the first call"
        assert_no_orphan_tool_results(context)
        assert "result call-2" in [m.content for m in context]
        assert "result call-1" not in [m.content for m in context]
        for size in range(1, 8):
            window = await store.context_messages(chat.chat_id, max_messages=size)
            assert_no_orphan_tool_results(window)
            assert window[0].content == "summary up to the first call"

    @pytest.mark.asyncio
    async def test_context_skips_hidden_messages_and_checks_arguments(self, store: Store) -> None:
        """Hidden messages stay out of context; bad arguments and deleted chats are refused."""
        chat = await store.create_chat("u-bound", "t-hidden")
        stored = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"h{i}") for i in range(3)]
        )
        await store.delete_messages(chat.chat_id, [stored[1].message_id])
        assert [m.content for m in await store.context_messages(chat.chat_id)] == ["h0", "h2"]
        with pytest.raises(InvalidArgument):
            await store.context_messages(chat.chat_id, max_messages=0)
        await store.delete_chat(chat.chat_id)
        with pytest.raises(ChatNotFound):
            await store.context_messages(chat.chat_id)
        with pytest.raises(ChatNotFound):
            await store.start_over(chat.chat_id)

    @pytest.mark.asyncio
    async def test_compaction_cut_only_moves_forward(self, store: Store) -> None:
        """``upto_seq`` below the current cut, below 1, or an empty summary is refused.

        The cut is the ``upto_seq`` of the compaction in effect, or the seq of the last
        "start over" line; nothing is written for a refused call.
        """
        chat = await store.create_chat("u-bound", "t-forward")
        stored = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"f{i}") for i in range(6)]
        )
        seqs = [m.seq for m in stored]
        assert None not in seqs
        first = await store.compact(chat.chat_id, "up to f3", seqs[3] or 0)
        rows = len(await self.raw_messages(store, chat.chat_id))
        for summary, upto in (
            ("back to f1", seqs[1]),
            ("zero", 0),
            ("negative", -3),
            ("", seqs[4]),
            ("  \n", seqs[4]),
        ):
            with pytest.raises(InvalidArgument):
                await store.compact(chat.chat_id, summary, upto or 0)
        assert len(await self.raw_messages(store, chat.chat_id)) == rows
        again = await store.compact(chat.chat_id, "up to f3", seqs[3] or 0)
        assert again.message_id == first.message_id, "a retry at the cut is idempotent"
        await store.append_message(chat.chat_id, Message(role="user", content="f6"))
        line = await store.start_over(chat.chat_id)
        assert line is not None
        assert line.seq is not None
        with pytest.raises(InvalidArgument):
            await store.compact(chat.chat_id, "before the line", seqs[5] or 0)
        tail = await store.append_message(chat.chat_id, Message(role="user", content="g0"))
        assert [m.content for m in await store.context_messages(chat.chat_id)] == ["g0"]
        at_line = await store.compact(chat.chat_id, "nothing new", line.seq)
        assert [m.content for m in await store.context_messages(chat.chat_id)] == [
            "nothing new",
            "g0",
        ]
        assert at_line.boundary is not None
        assert tail.seq is not None

    @pytest.mark.asyncio
    async def test_superseded_compaction_no_longer_cuts(self, store: Store) -> None:
        """A later compaction supersedes an earlier marker, which then cuts nothing.

        The messages between the two markers that the later summary does not cover stay
        in context; a "start over" line still cuts everything before it.
        """
        chat = await store.create_chat("u-bound", "t-supersede")
        early = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"a{i}") for i in range(4)]
        )
        await store.compact(chat.chat_id, "sum a0..a1", early[1].seq or 0)
        late = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"b{i}") for i in range(3)]
        )
        assert [m.content for m in await store.context_messages(chat.chat_id)] == [
            "sum a0..a1",
            "a2",
            "a3",
            "b0",
            "b1",
            "b2",
        ]
        await store.compact(chat.chat_id, "sum a0..a3", early[3].seq or 0)
        context = await store.context_messages(chat.chat_id)
        assert [m.content for m in context] == ["sum a0..a3", "b0", "b1", "b2"], (
            "the superseded compaction marker (after a3) cut b0..b2 away"
        )
        await store.append_message(chat.chat_id, Message(role="user", content="c0"))
        await store.start_over(chat.chat_id)
        await store.append_message(chat.chat_id, Message(role="user", content="d0"))
        with pytest.raises(InvalidArgument):
            await store.compact(chat.chat_id, "sum up to b1", late[1].seq or 0)
        assert [m.content for m in await store.context_messages(chat.chat_id)] == ["d0"]
        history = await walk_messages(store, chat.chat_id, limit=50)
        assert [m.kind for m in history.items].count(MessageKind.BOUNDARY) == 3
