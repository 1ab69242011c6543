"""Regression tests for core bugs the contract suite found (threadkeep-contract-tests)."""

from __future__ import annotations

from uuid import uuid4

from threadkeep import Message, MessageKind
from threadkeep._memory import MemoryStore


class PriorityMessage(Message):
    """A user subclass the store reads messages back as."""

    priority: int = 0


def _store(**options: object) -> MemoryStore:
    return MemoryStore(f"memory://regression-{uuid4().hex}", **options)  # type: ignore[arg-type]


async def test_message_without_agui_id_never_matches_empty_agui_id() -> None:
    """Memory driver: ``agui_id=None`` was looked up as ``""`` and hit a stored ``""``."""
    async with _store() as store:
        chat = await store.create_chat("u", "t")
        first = await store.append_message(
            chat.chat_id, Message(role="user", agui_id="", content="a")
        )
        second = await store.append_message(chat.chat_id, Message(role="user", content="b"))
        third = await store.append_message(chat.chat_id, Message(role="user", content="c"))
        assert len({first.message_id, second.message_id, third.message_id}) == 3
        again = await store.append_message(
            chat.chat_id, Message(role="user", agui_id="", content="a")
        )
        assert again.message_id == first.message_id


async def test_plain_retry_is_idempotent_on_a_subclass_store() -> None:
    """A retry written as ``Message`` conflicted with its copy read back as the subclass."""
    async with _store(message_model=PriorityMessage) as store:
        chat = await store.create_chat("u", "t")
        message = Message(role="user", agui_id="m1", content="hi")
        first = await store.append_message(chat.chat_id, message)
        again = await store.append_message(chat.chat_id, message)
        assert again.message_id == first.message_id
        assert isinstance(again, PriorityMessage)


async def test_start_over_after_hiding_the_line_draws_it_again() -> None:
    """``start_over`` returned the hidden boundary (same derived agui_id): no line in effect."""
    async with _store() as store:
        chat = await store.create_chat("u", "t")
        await store.append_message(chat.chat_id, Message(role="user", content="before"))
        line = await store.start_over(chat.chat_id)
        assert line is not None
        await store.delete_messages(chat.chat_id, [line.message_id])
        assert [m.content for m in await store.context_messages(chat.chat_id)] == ["before"]
        again = await store.start_over(chat.chat_id)
        assert again is not None
        assert again.deleted_at is None
        assert again.message_id != line.message_id
        assert await store.context_messages(chat.chat_id) == []
        assert (await store.start_over(chat.chat_id)) == again


async def test_compact_after_hiding_the_summary_draws_it_again() -> None:
    """``compact`` returned the hidden summary boundary, so the summary was not in effect."""
    async with _store() as store:
        chat = await store.create_chat("u", "t")
        stored = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"m{i}") for i in range(3)]
        )
        upto = stored[1].seq
        assert upto is not None
        summary = await store.compact(chat.chat_id, "sum", upto)
        await store.delete_messages(chat.chat_id, [summary.message_id])
        again = await store.compact(chat.chat_id, "sum", upto)
        assert again.deleted_at is None
        assert again.kind is MessageKind.BOUNDARY
        context = await store.context_messages(chat.chat_id)
        assert [m.content for m in context] == ["sum", "m2"]
        assert (await store.compact(chat.chat_id, "sum", upto)).message_id == again.message_id
