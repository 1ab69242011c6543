"""Archive primitives, capability ``archive``.

Cold archiving scans a chat's hot rows, writes them to object storage, deletes them, and can
restore them exactly; these tests check the driver primitives it is built on.
"""

from __future__ import annotations

from typing import ClassVar
from uuid import UUID

import pytest

from threadkeep import Capabilities, Message, Reasoning, Step, StepStatus, Store, ToolCall

from ._base import ContractBase, require_capability
from ._helpers import body_of, walk_messages

__all__ = ["ArchiveTests", "scan_all_messages"]

archive_capability = pytest.mark.threadkeep_capability("archive")


async def scan_all_messages(store: Store, chat_id: UUID, batch: int = 7) -> list[Message]:
    """Return every hot message of a chat, hidden ones included, via ``scan_messages``."""
    found: list[Message] = []
    after = 0
    while scanned := await store.primitives.scan_messages(chat_id, after, batch):
        found.extend(scanned)
        after = scanned[-1].seq or after
    return found


def _fingerprint(message: Message) -> tuple[object, ...]:
    return (message.seq, message.created_at, message.deleted_at is not None, body_of(message))


class ArchiveTests(ContractBase):
    """``scan_messages`` / ``delete_hot_messages`` / ``restore_messages`` round trip."""

    contract_area: ClassVar[str] = "Archive primitives"

    @pytest.mark.asyncio
    @archive_capability
    async def test_scan_delete_restore_round_trip(self, store: Store) -> None:
        """Scanned rows (hidden ones too), deleted and restored, read back exactly as before."""
        chat = await store.create_chat("u-archive", "t-round-trip")
        sent = [
            Message(
                role="user",
                agui_id=f"a{i}",
                content=f"m{i}\x00",
                tool_calls=[ToolCall(agui_id=f"c{i}", arguments="{ }")] if i % 3 == 0 else [],
                reasonings=[Reasoning(content="r")] if i % 4 == 0 else [],
            )
            for i in range(23)
        ]
        stored = await store.append_messages(chat.chat_id, sent)
        await store.delete_messages(chat.chat_id, [stored[5].message_id, stored[6].message_id])
        before = await walk_messages(store, chat.chat_id, limit=6)
        scanned = await scan_all_messages(store, chat.chat_id)
        assert [m.message_id for m in scanned] == [m.message_id for m in stored], (
            "scan lost or reordered rows"
        )
        assert sum(m.deleted_at is not None for m in scanned) == 2, "scan must include hidden rows"
        assert await store.primitives.delete_hot_messages(chat.chat_id) == 23
        assert await self.raw_messages(store, chat.chat_id) == []
        assert (await store.list_messages(chat.chat_id)).items == []
        assert await store.primitives.restore_messages(chat.chat_id, scanned) == 23
        assert await store.primitives.restore_messages(chat.chat_id, scanned) == 0, (
            "restore must be idempotent"
        )
        after = await walk_messages(store, chat.chat_id, limit=6)
        assert [_fingerprint(m) for m in after.items] == [_fingerprint(m) for m in before.items]
        assert [_fingerprint(m) for m in await scan_all_messages(store, chat.chat_id)] == [
            _fingerprint(m) for m in scanned
        ]
        found = await store.get_tool_call_by_agui_id(chat.chat_id, "c3")
        assert found is not None
        newest = max(m.seq or 0 for m in scanned)
        appended = await store.append_message(chat.chat_id, Message(role="user", content="after"))
        assert appended.seq is not None
        assert appended.seq > newest
        retried = await store.append_message(chat.chat_id, sent[0])
        assert retried.message_id == stored[0].message_id, "restored agui_ids must stay idempotent"

    @pytest.mark.asyncio
    @archive_capability
    async def test_steps_archive_round_trip(self, store: Store, capabilities: Capabilities) -> None:
        """With ``steps`` too: steps are scanned, deleted and restored exactly."""
        require_capability(capabilities, "steps")
        chat = await store.create_chat("u-archive", "t-steps")
        steps = [
            Step(
                chat_id=chat.chat_id,
                run_id="r",
                stack_id="s",
                type="llm",
                status=StepStatus.COMPLETED,
                output=i,
            )
            for i in range(5)
        ]
        await store.save_steps(steps)
        scanned = await store.primitives.scan_steps(chat.chat_id, 0, 100)
        assert [s.step_id for s in scanned] == [s.step_id for s in steps]
        assert await store.primitives.delete_hot_steps(chat.chat_id) == 5
        assert await store.get_steps(chat.chat_id, "r") == []
        assert await store.primitives.restore_steps(chat.chat_id, scanned) == 5
        assert await store.primitives.restore_steps(chat.chat_id, scanned) == 0
        assert await store.get_steps(chat.chat_id, "r") == scanned
        (extra,) = await store.save_steps(
            [Step(chat_id=chat.chat_id, run_id="r", stack_id="s", type="llm")]
        )
        assert extra.seq is not None
        assert extra.seq > max(s.seq or 0 for s in scanned)

    @pytest.mark.asyncio
    @archive_capability
    async def test_scan_reads_a_soft_deleted_chat(
        self, store: Store, capabilities: Capabilities
    ) -> None:
        """A soft-deleted chat's messages (hidden and large ones too) and steps still scan.

        ``Store.scan_messages`` / ``scan_steps`` promise deleted chats' rows: copying a
        deleted chat (``threadkeep copy``) depends on it, or its restore comes back empty.
        """
        chat = await store.create_chat("u-archive", "t-deleted-scan")
        sent = [Message(role="user", content=f"m{i}") for i in range(9)]
        sent.append(Message(role="assistant", content="x" * (800 * 1024)))
        stored = await store.append_messages(chat.chat_id, sent)
        await store.delete_messages(chat.chat_id, [stored[2].message_id])
        steps: list[Step] = []
        if capabilities.steps:
            steps = await store.save_steps(
                [
                    Step(chat_id=chat.chat_id, run_id="r", stack_id="s", type="llm", output=i)
                    for i in range(3)
                ]
            )
        live = await scan_all_messages(store, chat.chat_id, batch=4)
        await store.delete_chat(chat.chat_id)
        scanned = await scan_all_messages(store, chat.chat_id, batch=4)
        assert [_fingerprint(m) for m in scanned] == [_fingerprint(m) for m in live], (
            "a soft-deleted chat's scan must return the same rows as before the delete"
        )
        assert [m.message_id for m in scanned] == [m.message_id for m in stored]
        assert sum(m.deleted_at is not None for m in scanned) == 1, "hidden rows included"
        if capabilities.steps:
            scanned_steps = await store.primitives.scan_steps(chat.chat_id, 0, 2)
            scanned_steps += await store.primitives.scan_steps(
                chat.chat_id, scanned_steps[-1].seq or 0, 2
            )
            assert [s.step_id for s in scanned_steps] == [s.step_id for s in steps]
