"""Ordering and identity: ``seq`` is the only order; one live chat per key."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from itertools import pairwise
from typing import ClassVar
from uuid import uuid4

import pytest

from threadkeep import (
    Capabilities,
    ChatNotFound,
    IdempotencyConflict,
    Message,
    PayloadTooLarge,
    Store,
)

from ._base import ContractBase, StoreFactory
from ._helpers import SteppingClock, opened, walk_messages

__all__ = ["OrderingTests"]


def _numbered(count: int, prefix: str = "m") -> list[Message]:
    return [Message(role="user", content=f"{prefix}{i}") for i in range(count)]


class OrderingTests(ContractBase):
    """``seq`` assigned at commit, strictly increasing, the only sort key; chat identity."""

    contract_area: ClassVar[str] = "Ordering & identity"

    @pytest.mark.asyncio
    async def test_seq_increases_in_append_order(self, store: Store) -> None:
        """Each append gets a seq above every earlier one; pages follow append order."""
        chat = await store.create_chat("u-order", "t-1")
        seqs: list[int] = []
        for message in _numbered(12):
            stored = await store.append_message(chat.chat_id, message)
            assert stored.seq is not None
            seqs.append(stored.seq)
        assert all(a < b for a, b in pairwise(seqs)), seqs
        walk = await walk_messages(store, chat.chat_id, limit=5)
        assert [m.content for m in walk.items] == [f"m{i}" for i in range(12)]
        assert [m.seq for m in walk.items] == seqs

    @pytest.mark.asyncio
    async def test_batch_seqs_follow_batch_order(self, store: Store) -> None:
        """A batch's messages get increasing seqs in the order given."""
        chat = await store.create_chat("u-order", "t-batch")
        await store.append_message(chat.chat_id, Message(role="system", content="first"))
        stored = await store.append_messages(chat.chat_id, _numbered(7))
        assert [m.content for m in stored] == [f"m{i}" for i in range(7)]
        seqs = [m.seq for m in stored]
        assert all(a is not None and b is not None and a < b for a, b in pairwise(seqs))
        page = await store.list_messages(chat.chat_id)
        assert [m.content for m in page.items] == ["first"] + [f"m{i}" for i in range(7)]

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        "step", [timedelta(0), timedelta(seconds=-1)], ids=["frozen-clock", "backwards-clock"]
    )
    async def test_clock_never_changes_order(
        self, store_factory: StoreFactory, step: timedelta
    ) -> None:
        """A frozen clock or one stepping backwards leaves the append order intact."""
        async with opened(store_factory, clock=SteppingClock(step=step)) as store:
            chat = await store.create_chat("u-clock", "t-clock")
            for message in _numbered(9):
                await store.append_message(chat.chat_id, message)
            await store.append_messages(chat.chat_id, _numbered(6, prefix="b"))
            walk = await walk_messages(store, chat.chat_id, limit=4)
        expected = [f"m{i}" for i in range(9)] + [f"b{i}" for i in range(6)]
        assert [m.content for m in walk.items] == expected

    @pytest.mark.asyncio
    async def test_identical_timestamps_page_exactly(self, store_factory: StoreFactory) -> None:
        """250 messages sharing one timestamp page by 100 as 100/100/50, no repeat, no gap."""
        async with opened(store_factory, clock=SteppingClock()) as store:
            chat = await store.create_chat("u-ties", "t-ties")
            for start in range(0, 250, 50):
                batch = [Message(role="user", content=f"n{i}") for i in range(start, start + 50)]
                await store.append_messages(chat.chat_id, batch)
            walk = await walk_messages(store, chat.chat_id, limit=100)
        assert walk.sizes == [100, 100, 50]
        assert [m.content for m in walk.items] == [f"n{i}" for i in range(250)]
        assert len({m.message_id for m in walk.items}) == 250
        assert len({m.created_at for m in walk.items}) == 1

    @pytest.mark.asyncio
    async def test_concurrent_appends_get_distinct_increasing_seqs(self, store: Store) -> None:
        """50 concurrent appends to one chat: 50 messages, distinct seqs, none lost."""
        chat = await store.create_chat("u-race", "t-race")
        sent = _numbered(50, prefix="c")
        stored = await asyncio.gather(*(store.append_message(chat.chat_id, m) for m in sent))
        seqs = [m.seq for m in stored]
        assert len(set(seqs)) == 50, f"duplicate seqs under concurrency: {sorted(map(str, seqs))}"
        walk = await walk_messages(store, chat.chat_id, limit=200)
        assert sorted(m.message_id for m in walk.items) == sorted(m.message_id for m in sent)
        by_id = {m.message_id: m.seq for m in walk.items}
        assert all(by_id[m.message_id] == m.seq for m in stored), "read seq differs from returned"
        rows = await self.raw_live_messages(store, chat.chat_id)
        assert len(rows) == 50
        assert len({r.seq for r in rows}) == 50

    @pytest.mark.asyncio
    async def test_concurrent_creates_give_one_chat(
        self, store: Store, store_factory: StoreFactory, capabilities: Capabilities
    ) -> None:
        """20 concurrent ``create_chat`` calls for one key return one chat and never raise.

        With ``concurrent_processes`` declared, half of them go through a second instance.
        """
        if capabilities.concurrent_processes:
            async with opened(store_factory) as replica:
                chats = await asyncio.gather(
                    *(
                        (store, replica)[i % 2].create_chat("u-create", "t-create")
                        for i in range(20)
                    )
                )
        else:
            chats = await asyncio.gather(
                *(store.create_chat("u-create", "t-create") for _ in range(20))
            )
        assert len({c.chat_id for c in chats}) == 1, "one key gave several chats"
        raw = [
            c
            for c in await self.raw_chats(store)
            if (c.user_id, c.thread_id) == ("u-create", "t-create")
        ]
        assert len(raw) == 1, f"{len(raw)} chats stored for one key"

    @pytest.mark.asyncio
    async def test_create_returns_the_live_chat_unchanged(self, store: Store) -> None:
        """Creating an existing key returns the stored chat; other arguments are ignored."""
        first = await store.create_chat("u-same", "t-same", name="original", tenant_id="a")
        again = await store.create_chat("u-same", "t-same", name="other", tenant_id="a")
        assert again.chat_id == first.chat_id
        assert (again.name, again.tenant_id) == ("original", "a")
        # The tenant is part of the key (issue 12): tenant b gets its own new chat.
        other_tenant = await store.create_chat("u-same", "t-same", name="other", tenant_id="b")
        assert other_tenant.chat_id != first.chat_id
        assert (other_tenant.name, other_tenant.tenant_id) == ("other", "b")
        other_thread = await store.create_chat("u-same", "t-other")
        other_user = await store.create_chat("u-other", "t-same")
        assert len({first.chat_id, other_thread.chat_id, other_user.chat_id}) == 3
        found = await store.find_chat("u-same", "t-same", tenant_id="a")
        assert found is not None
        assert found.chat_id == first.chat_id
        assert await store.find_chat("u-same", "t-same") is None

    @pytest.mark.asyncio
    async def test_append_to_unknown_chat_raises(self, store: Store) -> None:
        """Appending to a chat that does not exist raises ``ChatNotFound``."""
        with pytest.raises(ChatNotFound):
            await store.append_message(uuid4(), Message(role="user", content="lost"))
        with pytest.raises(ChatNotFound):
            await store.append_messages(uuid4(), _numbered(3))

    @pytest.mark.asyncio
    async def test_batch_with_conflict_writes_nothing(self, store: Store) -> None:
        """A batch is all or nothing: a conflicting ``agui_id`` inside it writes none of it."""
        chat = await store.create_chat("u-atomic", "t-atomic")
        await store.append_message(chat.chat_id, Message(role="user", agui_id="a1", content="x"))
        before = await self.raw_messages(store, chat.chat_id)
        batch = [
            Message(role="user", agui_id="b1", content="new"),
            Message(role="assistant", content="new too"),
            Message(role="user", agui_id="a1", content="changed"),
            Message(role="user", agui_id="b2", content="new three"),
        ]
        with pytest.raises(IdempotencyConflict):
            await store.append_messages(chat.chat_id, batch)
        after = await self.raw_messages(store, chat.chat_id)
        assert sorted(r.seq for r in after) == sorted(r.seq for r in before), "batch half-written"
        assert await store.get_message_by_agui_id(chat.chat_id, "b1") is None
        retry = await store.append_messages(chat.chat_id, [batch[0], batch[1], batch[3]])
        assert [m.content for m in retry] == ["new", "new too", "new three"]

    @pytest.mark.asyncio
    async def test_batch_with_oversized_message_writes_nothing(
        self, store_factory: StoreFactory
    ) -> None:
        """A batch holding one message over ``max_message_bytes`` writes none of it."""
        async with opened(store_factory, max_message_bytes=1000) as store:
            chat = await store.create_chat("u-atomic", "t-size")
            batch = [Message(role="user", content="ok"), Message(role="user", content="x" * 1001)]
            with pytest.raises(PayloadTooLarge):
                await store.append_messages(chat.chat_id, batch)
            assert await self.raw_messages(store, chat.chat_id) == []
            assert (await store.list_messages(chat.chat_id)).items == []

    @pytest.mark.asyncio
    async def test_a_batch_of_1000_commits_whole_or_not_at_all(self, store: Store) -> None:
        """1,000 messages in one batch: all stored, in order; with a conflict, none of them.

        A backend whose own batch limit is smaller (a document service's 200 events) must
        still make the batch one all-or-nothing commit.
        """
        chat = await store.create_chat("u-big", "t-big")
        await store.append_message(chat.chat_id, Message(role="user", agui_id="x", content="x"))
        doomed = [Message(role="user", agui_id=f"d{i}", content=f"d{i}") for i in range(999)]
        with pytest.raises(IdempotencyConflict):  # the conflict is the very last message
            await store.append_messages(
                chat.chat_id, [*doomed, Message(role="user", agui_id="x", content="changed")]
            )
        assert len(await self.raw_live_messages(store, chat.chat_id)) == 1, "batch half-written"
        assert await store.get_message_by_agui_id(chat.chat_id, "d0") is None
        sent = [Message(role="user", agui_id=f"n{i}", content=f"n{i}") for i in range(1000)]
        stored = await store.append_messages(chat.chat_id, sent)
        assert [m.content for m in stored] == [f"n{i}" for i in range(1000)]
        seqs = [m.seq or 0 for m in stored]
        assert all(a < b for a, b in pairwise(seqs)), "batch seqs do not follow batch order"
        walk = await walk_messages(store, chat.chat_id, limit=200)
        assert [m.content for m in walk.items] == ["x"] + [f"n{i}" for i in range(1000)]
        assert [m.seq for m in walk.items[1:]] == seqs
        assert len(await self.raw_live_messages(store, chat.chat_id)) == 1001
        again = await store.append_messages(chat.chat_id, sent)  # a retry stores nothing new
        assert [m.message_id for m in again] == [m.message_id for m in stored]
        assert len(await self.raw_live_messages(store, chat.chat_id)) == 1001

    @pytest.mark.asyncio
    async def test_empty_batch_writes_nothing(self, store: Store) -> None:
        """An empty batch returns ``[]`` and stores nothing."""
        chat = await store.create_chat("u-empty", "t-empty")
        assert await store.append_messages(chat.chat_id, []) == []
        assert await self.raw_messages(store, chat.chat_id) == []
