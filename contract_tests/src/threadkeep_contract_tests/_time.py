"""Time: timestamps read back tz-aware UTC, whatever the process ``TZ`` is."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from typing import ClassVar

import pytest

from threadkeep import Chat, InvalidArgument, Message, Store

from ._base import ContractBase, StoreFactory
from ._helpers import SteppingClock, assert_utc, opened

__all__ = ["TimeTests", "process_timezone"]

ZONES = ("America/St_Johns", "Asia/Kathmandu", "Pacific/Kiritimati")
"""Process time zones with odd offsets (-03:30, +05:45, +14:00)."""

_KATHMANDU = timezone(timedelta(hours=5, minutes=45))


@contextmanager
def process_timezone(name: str) -> Iterator[None]:
    """Set the process time zone (``TZ`` + ``time.tzset``) for the block, then restore it.

    Raises:
        pytest.skip.Exception: On platforms without ``time.tzset`` (Windows).
    """
    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is not available on this platform")
    previous = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = previous
        time.tzset()


def _assert_chat_utc(chat: Chat, *, messages: bool) -> None:
    assert_utc(chat.created_at, "chat.created_at")
    assert_utc(chat.updated_at, "chat.updated_at")
    if messages:
        assert_utc(chat.last_message_at, "chat.last_message_at")


class TimeTests(ContractBase):
    """Timestamps are informational, tz-aware and UTC on read."""

    contract_area: ClassVar[str] = "Time"

    async def _write_and_check(self, store: Store, thread: str) -> tuple[Chat, Message]:
        chat = await store.create_chat("u-time", thread)
        message = await store.append_message(chat.chat_id, Message(role="user", content="t"))
        read_chat = await store.get_chat(chat.chat_id)
        read = await store.get_message(message.message_id)
        _assert_chat_utc(read_chat, messages=True)
        for item in (message, read, (await store.list_messages(chat.chat_id)).items[0]):
            assert_utc(item.created_at, "message.created_at")
            assert_utc(item.updated_at, "message.updated_at")
        return read_chat, read

    @pytest.mark.asyncio
    @pytest.mark.parametrize("zone", ZONES)
    async def test_timestamps_are_utc_whatever_tz(
        self, store_factory: StoreFactory, zone: str
    ) -> None:
        """Under an odd process ``TZ``, every timestamp reads back aware, UTC and exact."""
        start = datetime(2031, 5, 6, 7, 8, 9, tzinfo=_KATHMANDU)
        with process_timezone(zone):
            async with opened(store_factory, clock=SteppingClock(start=start)) as store:
                chat, message = await self._write_and_check(store, f"t-{zone}")
                assert chat.created_at == start, "the clock's instant was not kept"
                assert message.created_at is not None
                assert message.created_at >= start
                deleted = await store.delete_chat(chat.chat_id)
                assert_utc(deleted.deleted_at, "chat.deleted_at")
                assert [
                    c.deleted for c in await self.raw_chats(store) if c.chat_id == chat.chat_id
                ] == [True]

    @pytest.mark.asyncio
    async def test_given_created_at_keeps_its_instant(self, store: Store) -> None:
        """A client-given ``created_at`` in any offset reads back as the same instant in UTC."""
        chat = await store.create_chat("u-time", "t-given")
        given = datetime(2020, 2, 29, 23, 30, tzinfo=timezone(timedelta(hours=-3, minutes=-30)))
        stored = await store.append_message(chat.chat_id, Message(role="user", created_at=given))
        read = await store.get_message(stored.message_id)
        assert read.created_at == given
        assert_utc(read.created_at, "message.created_at")
        assert read.created_at is not None
        assert read.created_at.hour == 3

    @pytest.mark.asyncio
    @pytest.mark.threadkeep_capability("persistent")
    async def test_instants_survive_reopen_in_another_tz(self, store_factory: StoreFactory) -> None:
        """Written under one ``TZ`` and read after reopening under another: same instants."""
        with process_timezone("Asia/Kathmandu"):
            async with opened(store_factory) as writer:
                chat, message = await self._write_and_check(writer, "t-reopen")
        with process_timezone("America/St_Johns"):
            async with opened(store_factory) as reader:
                again = await reader.get_chat(chat.chat_id)
                read = await reader.get_message(message.message_id)
        assert (again.created_at, again.last_message_at) == (chat.created_at, chat.last_message_at)
        assert (read.created_at, read.updated_at) == (message.created_at, message.updated_at)
        assert_utc(read.created_at, "message.created_at")

    @pytest.mark.asyncio
    async def test_append_moves_chat_activity(self, store_factory: StoreFactory) -> None:
        """An append sets the chat's ``last_message_at`` and ``updated_at`` to its instant."""
        clock = SteppingClock(step=timedelta(seconds=1))
        async with opened(store_factory, clock=clock) as store:
            chat = await store.create_chat("u-time", "t-activity")
            message = await store.append_message(chat.chat_id, Message(role="user", content="a"))
            read = await store.get_chat(chat.chat_id)
        assert message.created_at is not None
        assert chat.created_at is not None
        assert message.created_at > chat.created_at
        assert read.last_message_at == message.created_at, "last_message_at is the append's"
        assert read.updated_at == message.created_at, "an append is an update of the chat"

    @pytest.mark.asyncio
    async def test_naive_clock_is_refused(self, store_factory: StoreFactory) -> None:
        """A clock returning naive datetimes is refused with ``InvalidArgument``."""
        naive = datetime(2030, 1, 1, tzinfo=UTC).replace(tzinfo=None)
        async with opened(store_factory, clock=lambda: naive) as store:
            with pytest.raises(InvalidArgument):
                await store.create_chat("u-time", "t-naive")
