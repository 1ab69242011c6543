"""Damaged rows: one corrupt row never bricks a chat (issue 12, item 1).

A row changed outside threadkeep raises :class:`threadkeep.CorruptRecord` naming the chat,
the seq and the column from every read that meets it, never a raw ``JSONDecodeError``,
``ValidationError``, ``ValueError`` or ``TypeError``; other rows and chats read and write
normally; a ``corrupt_records="skip"`` store reads every page past it and reports it in
``Page.corrupt``.

The damage is written through the driver's back-door write, ``damage_row`` (see
:data:`DAMAGES` and ``BackDoor`` in ``_raw.py``): a driver test class without it skips
these tests, naming the missing method.
"""

from __future__ import annotations

from typing import Any, ClassVar
from uuid import UUID

import pytest

from threadkeep import ChatFilter, CorruptRecord, Message, Store

from ._base import ContractBase, StoreFactory
from ._helpers import walk_past_damage

__all__ = ["DAMAGED_BODIES", "DAMAGED_TIMESTAMP", "DAMAGES", "CorruptRowTests", "write_damage"]

DAMAGES: dict[str, str] = {
    "body_not_json": "the body column holds text that is not JSON: 'not json {'",
    "body_not_object": "the body column holds JSON that is not an object: '[1, 2]'",
    "body_wrong_types": "the body is an object of wrong field types: '{\"role\": 5}'",
    "timestamp": "created_at holds an unparsable timestamp ('not-a-date' on SQLite)",
    "body_wrong_native_type": "the body field is of another native type (a BSON int 42)",
    "timestamp_wrong_native_type": "the timestamp field is of another native type (a string)",
}
"""Damage a back door may write: name -> what it writes. Drivers write those they can
hold (PostgreSQL cannot store 'not-a-date' in ``timestamptz``) and return ``None`` for the
rest."""


DAMAGED_BODIES: dict[str, Any] = {
    "body_not_json": "not json {",
    "body_not_object": "[1, 2]",
    "body_wrong_types": '{"role": 5}',
    "body_wrong_native_type": 42,
}
"""What a back door writes into the body for each ``body_*`` damage (42: a native int)."""

DAMAGED_TIMESTAMP = "not-a-date"
"""What a back door writes into a timestamp column for ``timestamp`` damage."""


async def write_damage(
    test: object, store: Store, kind: str, chat_id: UUID, *, seq: int | None, damage: str
) -> str | None:
    """Damage one row through ``test``'s back door ``damage_row``; skip the test without it.

    Returns:
        The column the ``CorruptRecord`` must name, or ``None`` if the backend cannot hold
        that damage.
    """
    writer = getattr(test, "damage_row", None)
    if writer is None:
        pytest.skip(
            f"{type(test).__name__} has no back-door write "
            "`async def damage_row(self, store, kind, chat_id, seq, damage) -> str | None`"
        )
    column: str | None = await writer(store, kind, chat_id, seq, damage)
    return column


class CorruptRowTests(ContractBase):
    """Damaged message and chat rows raise ``CorruptRecord``, or are skipped and reported."""

    contract_area: ClassVar[str] = "Corrupt rows"

    async def _damage(
        self, store: Store, kind: str, chat_id: UUID, seq: int | None, damage: str
    ) -> str | None:
        return await write_damage(self, store, kind, chat_id, seq=seq, damage=damage)

    async def _seeded(self, store: Store, thread: str) -> tuple[UUID, list[Message]]:
        chat = await store.create_chat("u-corrupt", thread)
        stored = await store.append_messages(
            chat.chat_id, [Message(role="user", content=f"m{i}") for i in range(6)]
        )
        return chat.chat_id, stored

    async def _damage_newest(self, store: Store, chat_id: UUID, stored: list[Message]) -> str:
        """Damage the chat's newest message with the first damage the back door can write."""
        for damage in DAMAGES:
            column = await self._damage(store, "message", chat_id, stored[-1].seq, damage)
            if column is not None:
                return column
        raise AssertionError("the back door wrote none of the damage kinds")

    async def _damaged_chats(self, store: Store) -> list[tuple[str, UUID, Message, str]]:
        """Damage message 3 of a chat per damage kind the driver can write."""
        damaged = []
        for damage in DAMAGES:
            chat_id, stored = await self._seeded(store, f"t-{damage}")
            column = await self._damage(store, "message", chat_id, stored[3].seq, damage)
            if column is not None:
                damaged.append((damage, chat_id, stored[3], column))
        assert damaged, "the back door wrote none of the damage kinds"
        return damaged

    @staticmethod
    def _check_error(error: CorruptRecord, chat_id: UUID, seq: int | None, column: str) -> None:
        assert error.chat_id == chat_id, f"CorruptRecord names chat {error.chat_id}"
        assert error.seq == seq, f"CorruptRecord names seq {error.seq}, not {seq}"
        assert error.column == column, f"CorruptRecord names column {error.column!r}"
        assert str(chat_id) in str(error), "the message does not name the chat"
        assert column in str(error), "the message does not name the column"

    @pytest.mark.asyncio
    async def test_damaged_message_raises_corrupt_record_on_every_read(self, store: Store) -> None:
        healthy_id, healthy = await self._seeded(store, "t-healthy")
        for damage, chat_id, bad, column in await self._damaged_chats(store):
            reads: dict[str, Any] = {
                "list_messages": store.list_messages(chat_id),
                "get_message": store.get_message(bad.message_id),
                "context_messages": store.context_messages(chat_id),
            }
            for name, read in reads.items():
                with pytest.raises(CorruptRecord) as caught:
                    await read
                self._check_error(caught.value, chat_id, bad.seq, column)
                assert caught.value.kind == "message", (damage, name)
            # Writes still succeed and the new newest message previews (a driver may read
            # ahead of a page, so only a skipping store promises pages around the row).
            await store.append_message(chat_id, Message(role="user", content="after"))
            last = await store.get_last_messages([chat_id, healthy_id])
            assert last[chat_id].content == "after", damage
        page = await store.list_messages(healthy_id)
        assert [m.message_id for m in page.items] == [m.message_id for m in healthy]

    @pytest.mark.asyncio
    async def test_damaged_newest_message_in_previews(self, store: Store) -> None:
        chat_id, stored = await self._seeded(store, "t-preview")
        column = await self._damage_newest(store, chat_id, stored)
        with pytest.raises(CorruptRecord) as caught:
            await store.get_last_messages([chat_id])
        self._check_error(caught.value, chat_id, stored[-1].seq, column)
        with pytest.raises(CorruptRecord) as caught:
            await store.list_chat_previews(ChatFilter(user_id="u-corrupt"))
        self._check_error(caught.value, chat_id, stored[-1].seq, column)

    @pytest.mark.asyncio
    async def test_skip_option_keeps_chat_of_damaged_preview(
        self, store_factory: StoreFactory
    ) -> None:
        async with store_factory(corrupt_records="skip") as store:
            chat_id, stored = await self._seeded(store, "t-preview-skip")
            healthy_id, _ = await self._seeded(store, "t-preview-healthy")
            await self._damage_newest(store, chat_id, stored)
            page = await store.list_chat_previews(ChatFilter(user_id="u-corrupt"))
            previews = {p.chat.chat_id: p.last_message for p in page.items}
            assert list(previews) == [chat_id, healthy_id], "a chat of a damaged preview is lost"
            damaged = previews[chat_id]
            assert damaged is None or damaged.seq != stored[-1].seq, "a damaged message previews"
            agrees = (await store.get_last_messages([chat_id])).get(chat_id)
            assert (damaged and damaged.message_id) == (agrees and agrees.message_id), (
                "the preview is not what get_last_messages reads"
            )
            healthy = previews[healthy_id]
            assert healthy is not None
            assert healthy.text == "m5"
            assert page.corrupt == [], "a damaged preview is reported as a damaged chat"

    @pytest.mark.asyncio
    async def test_skip_option_reads_past_damaged_rows(self, store_factory: StoreFactory) -> None:
        async with store_factory(corrupt_records="skip") as store:
            for damage, chat_id, bad, column in await self._damaged_chats(store):
                messages, corrupt = await walk_past_damage(store, chat_id, limit=2)
                assert [m.content for m in messages] == ["m0", "m1", "m2", "m4", "m5"], damage
                assert [(c.chat_id, c.seq, c.column) for c in corrupt] == [
                    (chat_id, bad.seq, column)
                ], damage
                window = await store.context_messages(chat_id)
                assert [m.content for m in window] == ["m0", "m1", "m2", "m4", "m5"]
                with pytest.raises(CorruptRecord):  # one record: nothing to return instead
                    await store.get_message(bad.message_id)

    @pytest.mark.asyncio
    async def test_skip_option_walks_a_page_of_only_damaged_rows(
        self, store_factory: StoreFactory
    ) -> None:
        async with store_factory(corrupt_records="skip") as store:
            chat_id, stored = await self._seeded(store, "t-all-bad")
            damage = None
            for candidate in DAMAGES:
                column = await self._damage(store, "message", chat_id, stored[5].seq, candidate)
                if column is not None:
                    damage = candidate
                    break
            assert damage is not None, "the back door wrote none of the damage kinds"
            for message in stored[2:5]:
                await self._damage(store, "message", chat_id, message.seq, damage)
            first = await store.list_messages(chat_id, limit=2)
            assert first.items == [], "a page of damaged rows returned items"
            assert len(first.corrupt) == 2, "the page does not report both damaged rows"
            assert first.has_more, "the walk stopped at a page of damaged rows"
            rest = await store.list_messages(chat_id, limit=10, cursor=first.next_cursor)
            assert [m.content for m in rest.items] == ["m0", "m1"]
            assert [c.seq for c in rest.corrupt] == [stored[3].seq, stored[2].seq]

    @pytest.mark.asyncio
    async def test_damaged_chat_row(self, store_factory: StoreFactory) -> None:
        async with store_factory() as store:
            good = await store.create_chat("u-corrupt", "t-good")
            bad = await store.create_chat("u-corrupt", "t-bad")
            column = await self._damage(store, "chat", bad.chat_id, None, "body_not_json")
            if column is None:
                pytest.skip("the back door cannot damage a chat row")
            with pytest.raises(CorruptRecord) as caught:
                await store.list_chats(ChatFilter(user_id="u-corrupt"))
            assert caught.value.kind == "chat"
            assert caught.value.column == column
            with pytest.raises(CorruptRecord) as caught:
                await store.list_chat_previews(ChatFilter(user_id="u-corrupt"))
            assert (caught.value.kind, caught.value.column) == ("chat", column)
            assert (await store.get_chat(good.chat_id)).chat_id == good.chat_id
        async with store_factory(corrupt_records="skip") as store:
            page = await store.list_chats(ChatFilter(user_id="u-corrupt"))
            assert [c.chat_id for c in page.items] == [good.chat_id]
            assert [(c.kind, c.column) for c in page.corrupt] == [("chat", column)]
            previews = await store.list_chat_previews(ChatFilter(user_id="u-corrupt"))
            assert [p.chat.chat_id for p in previews.items] == [good.chat_id]
            assert [(c.kind, c.column) for c in previews.corrupt] == [("chat", column)]
