"""Bulk load (``Store.load_messages``): append's guarantees, batch by batch, at any size."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar
from uuid import uuid4

import pytest

from threadkeep import (
    ChatNotFound,
    IdempotencyConflict,
    InvalidArgument,
    InvalidContent,
    Message,
    PayloadTooLarge,
    PreparedMessage,
    Reasoning,
    Store,
    ToolCall,
)
from threadkeep.driver import fingerprint, message_body

from ._base import ContractBase

__all__ = ["BulkLoadTests"]


def _history(count: int, *, prefix: str = "bulk", changed: int | None = None) -> Iterator[Message]:
    """``count`` messages with ``agui_id`` ``<prefix>-<n>``; every fifth carries a tool call."""
    for n in range(count):
        text = f"message {n} \x00 é 😀" + (" (changed)" if n == changed else "")
        calls = [ToolCall(agui_id=f"{prefix}-call-{n}", name="f", arguments=f'{{"n": {n}}}')]
        yield Message(
            role="assistant" if n % 2 else "user",
            agui_id=f"{prefix}-{n}",
            content=text,
            tool_calls=calls if n % 5 == 0 else [],
            reasonings=[Reasoning(agui_id=f"{prefix}-r-{n}", content="why")] if n == 3 else [],
        )


class BulkLoadTests(ContractBase):
    """``load_messages`` stores what ``append_messages`` would, idempotently, per batch."""

    contract_area: ClassVar[str] = "Bulk load"

    @pytest.mark.asyncio
    async def test_load_stores_every_message_in_order(self, store: Store) -> None:
        """Batches keep input order; seqs increase; nested ids are indexed as on append."""
        chat = await store.create_chat("u-bulk", "t-order")
        report = await store.load_messages(chat.chat_id, _history(23), batch_size=5)
        assert (report.created, report.present, report.batches) == (23, 0, 5)
        assert (report.tool_calls_created, report.tool_calls_present) == (5, 0)
        rows = await self.raw_messages(store, chat.chat_id)
        assert [r.agui_id for r in rows] == [f"bulk-{n}" for n in range(23)]
        assert [r.content for r in rows] == [m.content for m in _history(23)]
        seqs = [r.seq for r in rows]
        assert seqs == sorted(set(seqs))
        page = await store.list_messages(chat.chat_id, limit=200)
        assert [m.agui_id for m in page.items] == [f"bulk-{n}" for n in range(23)]
        stored = await store.get_message_by_agui_id(chat.chat_id, "bulk-10")
        assert stored is not None
        assert stored.tool_calls[0].arguments == '{"n": 10}'
        call = await store.get_tool_call(stored.tool_calls[0].tool_call_id)
        assert call.agui_id == "bulk-call-10"
        assert (await store.get_chat(chat.chat_id)).last_message_at is not None
        after = await store.append_message(chat.chat_id, Message(role="user", content="next"))
        assert after.seq is not None
        assert after.seq > seqs[-1]

    @pytest.mark.asyncio
    async def test_rerun_writes_nothing(self, store: Store) -> None:
        """Loading the same history again finds every message and writes none."""
        chat = await store.create_chat("u-bulk", "t-rerun")
        await store.load_messages(chat.chat_id, _history(12), batch_size=4)
        before = await self.raw_messages(store, chat.chat_id)
        revision = (await store.get_chat(chat.chat_id)).revision
        again = await store.load_messages(chat.chat_id, _history(12), batch_size=5)
        assert (again.created, again.present, again.tool_calls_present) == (0, 12, 3)
        assert await self.raw_messages(store, chat.chat_id) == before
        assert (await store.get_chat(chat.chat_id)).revision == revision
        retry = await store.append_message(chat.chat_id, next(_history(1)))
        assert retry.message_id == before[0].message_id

    @pytest.mark.asyncio
    async def test_changed_message_conflicts_and_its_batch_is_not_written(
        self, store: Store
    ) -> None:
        """A stored ``agui_id`` with another payload fails its batch; earlier ones stand."""
        chat = await store.create_chat("u-bulk", "t-conflict")
        await store.load_messages(chat.chat_id, _history(9), batch_size=9)
        with pytest.raises(IdempotencyConflict):
            await store.load_messages(chat.chat_id, _history(16, changed=7), batch_size=5)
        rows = await self.raw_messages(store, chat.chat_id)
        # Batch 0-4 is present; batch 5-9 holds the changed 7 and the new 9: nothing of it
        # is written (not 9 either), and the load stops there (10-15 are not written).
        assert [r.agui_id for r in rows] == [f"bulk-{n}" for n in range(9)]
        assert "changed" not in "".join(r.content for r in rows)

    @pytest.mark.asyncio
    async def test_repeats_within_a_batch(self, store: Store) -> None:
        """An ``agui_id`` twice in a batch is stored once, or conflicts if payloads differ."""
        chat = await store.create_chat("u-bulk", "t-repeat")
        same = Message(role="user", agui_id="r-1", content="x")
        report = await store.load_messages(chat.chat_id, [same, same.model_copy()])
        assert (report.created, report.present) == (1, 1)
        other = Message(role="user", agui_id="r-2", content="y")
        with pytest.raises(IdempotencyConflict):
            await store.load_messages(
                chat.chat_id, [other, other.model_copy(update={"content": "z"})]
            )
        assert [r.agui_id for r in await self.raw_messages(store, chat.chat_id)] == ["r-1"]

    @pytest.mark.parametrize("bad", ["nan", "surrogate", "too_large", "not_a_message"])
    @pytest.mark.asyncio
    async def test_content_checks_refuse_the_batch(self, store: Store, bad: str) -> None:
        """Every check of ``append_messages`` holds; the batch holding it is not written."""
        chat = await store.create_chat("u-bulk", f"t-bad-{bad}")
        messages: list[Any] = list(_history(4))
        if bad == "nan":
            messages.append(Message(role="user", content="n", metadata={"x": math.nan}))
        elif bad == "surrogate":
            messages.append(Message(role="user", content="lone \ud800"))
        elif bad == "too_large":
            messages.append(Message(role="user", content="x" * (store.max_message_bytes + 1)))
        else:
            messages.append({"role": "not-a-role", "content": "x"})
        expected = {
            "nan": InvalidContent,
            "surrogate": InvalidContent,
            "too_large": PayloadTooLarge,
            "not_a_message": InvalidArgument,
        }[bad]
        with pytest.raises(expected):
            await store.load_messages(chat.chat_id, messages, batch_size=10)
        assert await self.raw_messages(store, chat.chat_id) == []

    @pytest.mark.asyncio
    async def test_a_bad_message_in_a_later_batch_keeps_the_earlier_ones(
        self, store: Store
    ) -> None:
        """Batches before the refused one are stored; the refused one and later are not."""
        chat = await store.create_chat("u-bulk", "t-later")
        messages: list[Any] = list(_history(12))
        messages[9] = Message(role="user", agui_id="bad", content="lone \ud800")
        with pytest.raises(InvalidContent):
            await store.load_messages(chat.chat_id, messages, batch_size=4)
        rows = await self.raw_messages(store, chat.chat_id)
        assert [r.agui_id for r in rows] == [f"bulk-{n}" for n in range(8)]

    @pytest.mark.asyncio
    async def test_async_iterable_and_mappings(self, store: Store) -> None:
        """An async iterable of mappings is consumed in order, batch by batch."""
        chat = await store.create_chat("u-bulk", "t-async")

        async def produce() -> AsyncIterator[dict[str, object]]:
            for n in range(7):
                await asyncio.sleep(0)
                yield {"role": "user", "agui_id": f"a-{n}", "content": str(n)}

        report = await store.load_messages(chat.chat_id, produce(), batch_size=3)
        assert (report.created, report.batches) == (7, 3)
        rows = await self.raw_messages(store, chat.chat_id)
        assert [r.content for r in rows] == [str(n) for n in range(7)]

    @pytest.mark.asyncio
    async def test_missing_or_deleted_chat_and_bad_arguments(self, store: Store) -> None:
        """A missing or deleted chat is ``ChatNotFound``; bad arguments ``InvalidArgument``."""
        with pytest.raises(ChatNotFound):
            await store.load_messages(uuid4(), _history(2))
        chat = await store.create_chat("u-bulk", "t-deleted")
        await store.delete_chat(chat.chat_id)
        with pytest.raises(ChatNotFound):
            await store.load_messages(chat.chat_id, _history(2))
        live = await store.create_chat("u-bulk", "t-args")
        for size in (0, -1, 10**9, "5", 2.5, True):
            with pytest.raises(InvalidArgument):
                await store.load_messages(live.chat_id, _history(1), batch_size=size)  # type: ignore[arg-type]
        for value in (5, "text", Message(role="user", content="x")):
            with pytest.raises(InvalidArgument):
                await store.load_messages(live.chat_id, value)  # type: ignore[arg-type]
        assert await self.raw_messages(store, live.chat_id) == []

    @pytest.mark.asyncio
    async def test_concurrent_load_and_appends_keep_one_order(self, store: Store) -> None:
        """Loads racing live appends on one chat: every message once, seqs strictly ordered."""
        chat = await store.create_chat("u-bulk", "t-race")

        async def append(n: int) -> None:
            await store.append_message(
                chat.chat_id, Message(role="user", agui_id=f"live-{n}", content=str(n))
            )

        await asyncio.gather(
            store.load_messages(chat.chat_id, _history(30, prefix="one"), batch_size=7),
            store.load_messages(chat.chat_id, _history(30, prefix="two"), batch_size=11),
            *(append(n) for n in range(10)),
        )
        rows = await self.raw_messages(store, chat.chat_id)
        assert len(rows) == 70
        assert len({r.agui_id for r in rows}) == 70
        seqs = [r.seq for r in rows]
        assert seqs == sorted(set(seqs))
        for prefix in ("one", "two"):
            mine = [r.agui_id for r in rows if str(r.agui_id).startswith(prefix + "-")]
            assert mine == [f"{prefix}-{n}" for n in range(30)]

    @pytest.mark.asyncio
    async def test_prepared_messages_load_as_the_messages_would(self, store: Store) -> None:
        """What ``Store.prepare`` returned loads as the message itself, idempotently."""
        chat = await store.create_chat("u-bulk", "t-prepared")
        source = list(_history(10))
        mixed: list[Any] = [store.prepare(m) if n % 2 else m for n, m in enumerate(source)]
        report = await store.load_messages(chat.chat_id, mixed, batch_size=4)
        assert (report.created, report.present, report.tool_calls_created) == (10, 0, 2)
        rows = await self.raw_messages(store, chat.chat_id)
        assert [r.agui_id for r in rows] == [f"bulk-{n}" for n in range(10)]
        assert [r.content for r in rows] == [m.content for m in source]
        assert {r.chat_id for r in rows} == {chat.chat_id}
        stored = await store.get_message_by_agui_id(chat.chat_id, "bulk-5")
        assert stored is not None
        assert stored.tool_calls[0].agui_id == "bulk-call-5"
        prepared = [store.prepare(m) for m in _history(10)]
        again = await store.load_messages(chat.chat_id, prepared, batch_size=3)
        assert (again.created, again.present, again.tool_calls_present) == (0, 10, 2)
        assert await self.raw_messages(store, chat.chat_id) == rows
        retry = await store.append_message(chat.chat_id, next(_history(1)))
        assert retry.message_id == rows[0].message_id
        changed = list(_history(10, changed=4))
        with pytest.raises(IdempotencyConflict):
            await store.load_messages(chat.chat_id, [store.prepare(m) for m in changed])
        assert await self.raw_messages(store, chat.chat_id) == rows

    @pytest.mark.asyncio
    async def test_a_prepared_message_refused_mid_batch_writes_nothing_of_it(
        self, store: Store
    ) -> None:
        """Over this store's limit, or not a prepared message: its batch is not written."""
        chat = await store.create_chat("u-bulk", "t-prepared-bad")
        messages: list[Any] = [store.prepare(m) for m in _history(12)]
        big = Message(role="user", agui_id="big", content="x" * (store.max_message_bytes + 1))
        body = message_body(big)
        messages[6] = PreparedMessage(message=big, body=body, fingerprint=fingerprint(big))
        with pytest.raises(PayloadTooLarge):
            await store.load_messages(chat.chat_id, messages, batch_size=4)
        rows = await self.raw_messages(store, chat.chat_id)
        assert [r.agui_id for r in rows] == [f"bulk-{n}" for n in range(4)]
        forged: Any = PreparedMessage(message=big, body=body, fingerprint="not a fingerprint")
        with pytest.raises(InvalidArgument):
            await store.load_messages(chat.chat_id, [*messages[:4], forged])
        with pytest.raises(InvalidArgument):
            await store.load_messages(chat.chat_id, [PreparedMessage("x", "{}", "0" * 64)])  # type: ignore[arg-type]
        assert await self.raw_messages(store, chat.chat_id) == rows

    @pytest.mark.asyncio
    async def test_agui_ids_with_nul_and_backslash_are_found_on_a_rerun(self, store: Store) -> None:
        """Key escapes (U+0000, backslash) do not hide a stored ``agui_id`` from a re-run."""
        chat = await store.create_chat("u-bulk", "t-keys")
        ids = ["a\x00b", "a\\0b", "a\\\\b", "plain", "é\x00"]
        messages = [Message(role="user", agui_id=i, content=str(n)) for n, i in enumerate(ids)]
        first = await store.load_messages(chat.chat_id, messages, batch_size=2)
        assert (first.created, first.present) == (5, 0)
        again = await store.load_messages(chat.chat_id, messages)
        assert (again.created, again.present) == (0, 5)
        rows = await self.raw_messages(store, chat.chat_id)
        assert [r.agui_id for r in rows] == ids
        changed = messages[0].model_copy(update={"content": "other"})
        with pytest.raises(IdempotencyConflict):
            await store.load_messages(chat.chat_id, [changed])
