"""A stored row at or above the chat's next seq never bricks the chat (issue 12, left item a).

A row written outside threadkeep with a ``seq`` the chat's counter has not reached yet (a
restored backup, a manual insert, a half-applied migration) is in the way of the next
append's seq. The driver repairs the counter from the chat's highest stored seq and
writes the append after it, atomically, and logs the repair (a ``WARNING`` naming the
chat): every append keeps working, nothing is lost or written twice, concurrent appenders
still never share a seq, and a damaged row up there stays reported by reads as the
corrupt-row rules say.

The row is moved through the driver's back door ``move_message`` (see ``BackDoor`` in
``_raw.py``): a driver test class without it skips these tests, naming the method.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar
from uuid import UUID

import pytest

from threadkeep import CorruptRecord, Message, Store

from ._base import ContractBase, StoreFactory
from ._corrupt_rows import DAMAGES
from ._helpers import walk_messages
from ._steps import steps_capability

__all__ = ["SeqCollisionTests"]

RACING_WRITERS = 20
"""Concurrent appenders after the row was moved."""


class SeqCollisionTests(ContractBase):
    """A row moved ahead of the chat's seq counter: appends repair it and go on."""

    contract_area: ClassVar[str] = "Corrupt rows"
    counter_behind: bool = False
    """Set per test by ``_seeded_ahead`` from what the back door reported."""

    async def _move(self, store: Store, chat_id: UUID, seq: int, new_seq: int) -> str:
        mover = getattr(self, "move_message", None)
        if mover is None:
            pytest.skip(
                f"{type(self).__name__} has no back-door write `async def move_message("
                "self, store, chat_id, seq, new_seq) -> 'behind' | 'followed' | None`"
            )
        counter: str | None = await mover(store, chat_id, seq, new_seq)
        if counter is None:
            pytest.skip(f"{type(self).__name__}.move_message: the backend cannot hold the row")
        assert counter in ("behind", "followed"), f"move_message returned {counter!r}"
        return counter

    async def _seeded_ahead(self, store: Store, thread: str, ahead: int) -> tuple[UUID, Message]:
        """A chat of four messages whose newest row is moved ``ahead`` seqs further up.

        Sets ``self.counter_behind``: whether the backend's counter stayed behind the row
        (the driver must repair it, and log that), or followed it on its own.
        """
        chat = await store.create_chat("u-seq", thread)
        stored = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"m{i}") for i in range(4)]
        )
        newest = stored[-1]
        assert newest.seq is not None
        counter = await self._move(store, chat.chat_id, newest.seq, newest.seq + ahead)
        self.counter_behind = counter == "behind"
        moved = await store.get_message(newest.message_id)
        assert moved.seq == newest.seq + ahead, "the back door did not move the row"
        return chat.chat_id, moved

    async def _check_whole(self, store: Store, chat_id: UUID, contents: list[str]) -> None:
        """Every message once, in seq order, as the store and the back door see them."""
        items = (await walk_messages(store, chat_id, limit=5)).items
        assert [m.content for m in items] == contents, "messages lost, duplicated or reordered"
        seqs = [m.seq or 0 for m in items]
        assert seqs == sorted(set(seqs)), f"seqs not strictly increasing: {seqs}"
        raw = await self.raw_live_messages(store, chat_id)
        assert [r.content for r in raw] == contents, "the stored rows differ from the reads"
        assert [r.seq for r in raw] == seqs

    def _check_logged(self, caplog: pytest.LogCaptureFixture, chat_id: UUID) -> None:
        if not self.counter_behind:  # the backend moved its counter: nothing to repair
            return
        repairs = [
            r
            for r in caplog.records
            if r.levelno >= logging.WARNING and str(chat_id) in r.getMessage()
        ]
        assert repairs, "the repair of the chat's seq counter was not logged (WARNING)"

    @pytest.mark.asyncio
    async def test_a_row_ahead_of_the_counter_does_not_brick_the_chat(
        self, store: Store, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.WARNING)
        chat_id, moved = await self._seeded_ahead(store, "t-ahead", 1)
        first = await store.append_message(chat_id, Message(role="user", content="a0"))
        assert first.seq is not None
        assert moved.seq is not None
        assert first.seq > moved.seq, "the append was not placed after the moved row"
        retried = Message(role="assistant", content="a1", agui_id="agui-a1")
        keyed = await store.append_message(chat_id, retried)
        again = await store.append_message(chat_id, retried)
        assert again.message_id == keyed.message_id, "a retry after the repair was stored twice"
        batch = await store.append_messages(
            chat_id, [Message(role="user", content=f"b{i}") for i in range(3)]
        )
        assert [m.content for m in batch] == ["b0", "b1", "b2"]
        contents = ["m0", "m1", "m2", "m3", "a0", "a1", "b0", "b1", "b2"]
        await self._check_whole(store, chat_id, contents)
        self._check_logged(caplog, chat_id)

    @pytest.mark.asyncio
    async def test_a_batch_across_a_row_ahead_is_written_whole(self, store: Store) -> None:
        chat_id, moved = await self._seeded_ahead(store, "t-across", 2)
        batch = await store.append_messages(
            chat_id, [Message(role="user", content=f"b{i}") for i in range(4)]
        )
        assert moved.seq is not None
        assert all(m.seq is not None and m.seq > moved.seq for m in batch)
        await self._check_whole(store, chat_id, ["m0", "m1", "m2", "m3", "b0", "b1", "b2", "b3"])

    @pytest.mark.asyncio
    async def test_racing_appends_after_a_row_ahead_all_succeed(self, store: Store) -> None:
        chat_id, _ = await self._seeded_ahead(store, "t-race", 1)

        async def writer(n: int) -> list[Message]:
            if n % 4 == 0:  # some batches among the single appends
                batch = [Message(role="user", content=f"w{n}-{i}") for i in range(2)]
                return await store.append_messages(chat_id, batch)
            return [await store.append_message(chat_id, Message(role="user", content=f"w{n}"))]

        results = await asyncio.gather(*(writer(n) for n in range(RACING_WRITERS)))
        written = [m for batch in results for m in batch]
        seqs = [m.seq for m in written]
        assert len(set(seqs)) == len(seqs), "two racing appends got the same seq"
        raw = await self.raw_live_messages(store, chat_id)
        assert sorted(r.content for r in raw) == sorted(
            ["m0", "m1", "m2", "m3", *(m.content for m in written)]
        ), "messages lost or duplicated"
        assert len({r.seq for r in raw}) == len(raw)

    @pytest.mark.asyncio
    async def test_a_damaged_row_ahead_stays_reported(self, store_factory: StoreFactory) -> None:
        async with store_factory() as store:
            chat_id, moved = await self._seeded_ahead(store, "t-damaged-ahead", 1)
            assert moved.seq is not None
            damager: Any = getattr(self, "damage_row", None)
            column = None
            for damage in DAMAGES if damager is not None else ():
                column = await damager(store, "message", chat_id, moved.seq, damage)
                if column is not None:
                    break
            if column is None:
                pytest.skip("the back door cannot damage a message row (`damage_row`)")
            after = await store.append_message(chat_id, Message(role="user", content="after"))
            assert after.seq is not None
            assert after.seq > moved.seq
            with pytest.raises(CorruptRecord) as caught:
                await store.list_messages(chat_id)
            assert (caught.value.seq, caught.value.column) == (moved.seq, column)
        async with store_factory(corrupt_records="skip") as store:
            page = await store.list_messages(chat_id)
            assert [m.content for m in page.items] == ["m0", "m1", "m2", "after"]
            assert [(c.seq, c.column) for c in page.corrupt] == [(moved.seq, column)]

    @pytest.mark.asyncio
    async def test_bulk_loads_after_a_row_ahead_succeed(self, store: Store) -> None:
        chat_id, _ = await self._seeded_ahead(store, "t-load", 1)
        report = await store.load_messages(
            chat_id, [Message(role="user", content=f"l{i}") for i in range(5)]
        )
        assert report.created == 5
        await self._check_whole(
            store, chat_id, ["m0", "m1", "m2", "m3", *(f"l{i}" for i in range(5))]
        )

    @steps_capability
    @pytest.mark.asyncio
    async def test_run_commits_after_a_row_ahead_succeed(self, store: Store) -> None:
        chat_id, _ = await self._seeded_ahead(store, "t-run", 1)
        await store.begin_run(
            chat_id, "r-ahead", owner="w", messages=[Message(role="user", content="r0")]
        )
        await self._check_whole(store, chat_id, ["m0", "m1", "m2", "m3", "r0"])
