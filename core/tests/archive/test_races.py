"""Rehydration racing an archiver's hot-row delete (memory driver, deterministic)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from threadkeep import Archiver, ChatStatus, FileArchive, Message, Store
from threadkeep._memory import MemoryDriver


class RacyMemory(MemoryDriver):
    """Deletes the chat's hot rows (as a racing archiver would) right after one restore."""

    race_after_restore = False

    async def restore_messages(self, chat_id: UUID, messages: Sequence[Message]) -> int:
        restored = await super().restore_messages(chat_id, messages)
        if self.race_after_restore:
            self.race_after_restore = False
            chat = await self.get_chat(chat_id)
            assert chat is not None
            assert await self.delete_archived_rows(chat_id, chat.revision) is not None
        return restored


async def test_rows_deleted_during_rehydration_are_restored_again(tmp_path) -> None:
    async with (
        Store(RacyMemory("memory://")) as store,
        FileArchive(f"file://{tmp_path}") as archive,
    ):
        chat = await store.create_chat("u", "t")
        sent = [Message(role="user", content=f"m{i}") for i in range(1200)]
        await store.append_messages(chat.chat_id, sent)
        before = await store.primitives.scan_messages(chat.chat_id, 0, 10_000)
        await Archiver(store, archive).archive_chat(chat.chat_id)
        store.driver.race_after_restore = True
        page = await store.list_messages(chat.chat_id, limit=200)
        assert store.driver.race_after_restore is False  # the race happened
        assert page.items[-1].content == "m1199"
        assert (await store.get_chat(chat.chat_id)).status is ChatStatus.ACTIVE
        assert await store.primitives.scan_messages(chat.chat_id, 0, 10_000) == before
