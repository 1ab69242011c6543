"""Archiving end to end, as a reusable pytest base class.

Subclass :class:`ArchiveLifecycleContract` and provide two fixtures (the convention of
:mod:`._archive_base`): ``store_factory`` (unopened hot stores whose driver declares
``archive``) and ``archive_factory`` (unopened archive stores on an empty root). Every test
checks what a user sees (pages, lookups by id, context) and what is stored: the hot rows
through ``scan_messages``/``scan_steps`` (hidden ones included), the archive through its
listing.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from threadkeep import (
    ArchiveIntegrityError,
    Archiver,
    ArchiveRef,
    BackendUnavailable,
    Chat,
    ChatNotFound,
    ChatStatus,
    Message,
    MessageNotFound,
    Reasoning,
    Role,
    Step,
    StepStatus,
    Store,
    ToolCall,
)
from threadkeep.testing_archive import FaultyArchive, InjectedFault, list_keys, read_object

from ._archive_base import LifecycleFixtures

__all__ = ["STEPS", "ArchiveLifecycleContract", "CrashingArchiver", "SimulatedCrash"]

STEPS = ("pending", "written", "verified", "flipped", "rows_deleted")
"""The checkpoints of ``archive_chat``, in order (see ``Archiver.archive_chat``)."""


class SimulatedCrash(Exception):
    """Raised by :class:`CrashingArchiver` to stop ``archive_chat`` like a dead process."""


class CrashingArchiver(Archiver):
    """An archiver that "dies" right after the named step of ``archive_chat``."""

    def __init__(self, store: Store, archive: Any, crash_after: str, **options: Any) -> None:
        super().__init__(store, archive, **options)
        self.crash_after = crash_after

    async def _checkpoint(self, step: str, chat_id: UUID) -> None:
        if step == self.crash_after:
            raise SimulatedCrash(f"crashed after {step} of chat {chat_id}")


async def _fill(store: Store, user: str = "u-arch", thread: str = "t1", n: int = 40) -> Chat:
    chat = await store.create_chat(user, thread, tenant_id="acme/é")
    sent = [
        Message(
            role=Role.USER if i % 2 else Role.ASSISTANT,
            agui_id=f"a{i}",
            content=f"message {i} \x00 ✓ 漢字 🙂",
            tool_calls=[ToolCall(agui_id=f"c{i}", name="f", arguments='{"x": 1 }')]
            if i % 5 == 0
            else [],
            reasonings=[Reasoning(agui_id=f"r{i}", content="why")] if i % 7 == 0 else [],
            metadata={"i": i},
        )
        for i in range(n)
    ]
    stored = await store.append_messages(chat.chat_id, sent)
    await store.delete_messages(chat.chat_id, [stored[min(3, n - 1)].message_id])
    await store.start_over(chat.chat_id)
    await store.append_message(chat.chat_id, Message(role=Role.USER, content="after", agui_id="z"))
    if store.capabilities.steps:
        await store.save_steps(
            [
                Step(chat_id=chat.chat_id, stack_id="s1", type="llm", run_id="r1"),
                Step(
                    chat_id=chat.chat_id,
                    stack_id="s1",
                    type="tool",
                    run_id="r1",
                    status=StepStatus.COMPLETED,
                    output={"ok": True},
                ),
            ]
        )
    return await store.get_chat(chat.chat_id)


async def history(store: Store, chat_id: UUID, limit: int = 7) -> list[dict[str, Any]]:
    """Every visible message of the chat, oldest first, by walking ``list_messages``."""
    pages: list[list[Message]] = []
    cursor = None
    while True:
        page = await store.list_messages(chat_id, limit=limit, cursor=cursor)
        pages.append(page.items)
        if not page.has_more:
            break
        cursor = page.next_cursor
    return [m.model_dump(mode="json") for items in reversed(pages) for m in items]


async def hot_rows(store: Store, chat_id: UUID) -> int:
    """Messages (hidden ones too) and steps of the chat still in the hot store."""
    count, after = 0, 0
    while messages := await store.scan_messages(chat_id, after_seq=after, limit=1000):
        count += len(messages)
        after = messages[-1].seq or after
    after = 0
    while store.capabilities.steps and (
        steps := await store.scan_steps(chat_id, after_seq=after, limit=1000)
    ):
        count += len(steps)
        after = steps[-1].seq or after
    return count


async def stored_chat(store: Store, chat_id: UUID) -> Chat | None:
    """The chat as stored, deleted or not (never rehydrated), or ``None`` if there is none."""
    try:
        return await store.get_chat(chat_id, include_deleted=True)
    except ChatNotFound:
        return None


async def assert_one_verified_object(store: Store, archive: Any, chat_id: UUID) -> None:
    """The chat is archived, has no hot rows, and exactly one object matches its ref."""
    chat = await stored_chat(store, chat_id)
    assert chat is not None
    assert chat.status is ChatStatus.ARCHIVED
    assert chat.archive_ref is not None
    ref = ArchiveRef.parse(chat.archive_ref)
    assert await list_keys(archive) == [ref.key]
    body = await read_object(archive, ref.key)
    assert hashlib.sha256(body).hexdigest() == ref.sha256
    head = await archive.head(ref.key)
    assert head is not None
    assert head.sha256 == ref.sha256
    assert await hot_rows(store, chat_id) == 0


class ArchiveLifecycleContract(LifecycleFixtures):
    """``archive_chat``, tiered reads, policy, erasure and faults on a store + archive."""

    async def test_archive_then_read_everything_back(self, store: Store, archive: Any) -> None:
        """Archived chats read back equal: pages, context, lookups by id and agui_id."""
        chat = await _fill(store)
        before = await history(store, chat.chat_id)
        context = await store.context_messages(chat.chat_id)
        result = await Archiver(store, archive).archive_chat(chat.chat_id)
        assert result.messages == 42
        await assert_one_verified_object(store, archive, chat.chat_id)
        assert await store.get_last_messages([chat.chat_id]) == {}, (
            "previews leave archived chats out (and do not rehydrate them)"
        )
        assert (await store.get_chat(chat.chat_id)).status is ChatStatus.ARCHIVED
        assert await history(store, chat.chat_id) == before
        assert await store.context_messages(chat.chat_id) == context
        assert (await store.get_chat(chat.chat_id)).status is ChatStatus.ACTIVE

    async def test_lookups_by_id_find_archived_chats(self, store: Store, archive: Any) -> None:
        """``get_message``, ``get_tool_call``, ``get_reasoning`` and agui lookups rehydrate."""
        chat = await _fill(store)
        archiver = Archiver(store, archive)
        message = await store.get_message_by_agui_id(chat.chat_id, "a10")
        assert message is not None
        await archiver.archive_chat(chat.chat_id)
        assert await store.get_message(message.message_id) == message
        await archiver.archive_chat(chat.chat_id)
        call = await store.get_tool_call(message.tool_calls[0].tool_call_id)
        assert call.arguments == '{"x": 1 }'
        await archiver.archive_chat(chat.chat_id)
        assert await store.get_message_by_agui_id(chat.chat_id, "a10") == message
        await archiver.archive_chat(chat.chat_id)
        assert (await store.get_tool_call_by_agui_id(chat.chat_id, "c10")) == call
        await archiver.archive_chat(chat.chat_id)
        with pytest.raises(MessageNotFound):
            await store.get_message(UUID(int=7))

    async def test_step_reads_rehydrate(self, store: Store, archive: Any) -> None:
        """``get_steps`` and ``get_last_incomplete_step`` see an archived chat's steps."""
        if not store.capabilities.steps:
            pytest.skip("the driver does not declare the 'steps' capability")
        chat = await _fill(store)
        steps = await store.get_steps(chat.chat_id, "r1")
        last = await store.get_last_incomplete_step(chat.chat_id)
        archiver = Archiver(store, archive)
        await archiver.archive_chat(chat.chat_id)
        assert await store.get_steps(chat.chat_id, "r1") == steps
        await archiver.archive_chat(chat.chat_id)
        assert await store.get_last_incomplete_step(chat.chat_id) == last

    async def test_append_restores_first(self, store: Store, archive: Any) -> None:
        """Appending to an archived chat restores it; the new message comes after all."""
        chat = await _fill(store)
        before = await history(store, chat.chat_id)
        await Archiver(store, archive).archive_chat(chat.chat_id)
        new = await store.append_message(chat.chat_id, Message(role=Role.USER, content="back"))
        after = await history(store, chat.chat_id)
        assert after[:-1] == before
        assert after[-1]["message_id"] == str(new.message_id)
        assert new.seq is not None
        assert new.seq > before[-1]["seq"]

    async def test_restore_chat_undeletes_and_rehydrates(self, store: Store, archive: Any) -> None:
        """``restore_chat`` on a deleted archived chat brings it back, hot."""
        chat = await _fill(store)
        before = await history(store, chat.chat_id)
        await Archiver(store, archive).archive_chat(chat.chat_id)
        await store.delete_chat(chat.chat_id)
        restored = await store.restore_chat(chat.chat_id)
        assert restored.status is ChatStatus.ACTIVE
        assert restored.deleted_at is None
        assert await hot_rows(store, chat.chat_id) > 0
        assert await history(store, chat.chat_id) == before

    async def test_rerun_is_idempotent(self, store: Store, archive: Any) -> None:
        """A second ``archive_chat`` changes nothing and reports no rows deleted."""
        chat = await _fill(store)
        archiver = Archiver(store, archive)
        first = await archiver.archive_chat(chat.chat_id)
        again = await archiver.archive_chat(chat.chat_id)
        assert again.archive_ref == first.archive_ref
        assert again.deleted_rows == 0
        await assert_one_verified_object(store, archive, chat.chat_id)

    async def test_rearchive_after_read_keeps_one_object(self, store: Store, archive: Any) -> None:
        """Read (rehydrate), change, archive again: the stale object is replaced."""
        chat = await _fill(store)
        archiver = Archiver(store, archive)
        first = await archiver.archive_chat(chat.chat_id)
        await store.append_message(chat.chat_id, Message(role=Role.USER, content="more"))
        before = await history(store, chat.chat_id)
        second = await archiver.archive_chat(chat.chat_id)
        assert second.archive_ref != first.archive_ref
        await assert_one_verified_object(store, archive, chat.chat_id)
        assert await history(store, chat.chat_id) == before

    async def test_chat_changed_during_archiving_is_not_flipped(
        self, store: Store, archive: Any
    ) -> None:
        """A message written after the bundle is kept: the flip fails and the job retries."""
        chat = await _fill(store)

        class Interloper(Archiver):
            wrote = False

            async def _checkpoint(self, step: str, chat_id: UUID) -> None:
                if step == "verified" and not self.wrote:
                    self.wrote = True
                    await store.append_message(chat_id, Message(role=Role.USER, content="late"))

        await Interloper(store, archive).archive_chat(chat.chat_id)
        await assert_one_verified_object(store, archive, chat.chat_id)
        assert (await history(store, chat.chat_id))[-1]["content"] == "late"

    async def test_read_between_flip_and_delete_keeps_rows(
        self, store: Store, archive: Any
    ) -> None:
        """A reader rehydrating right after the flip wins: the archiver deletes nothing."""
        chat = await _fill(store)
        before = await history(store, chat.chat_id)

        class Raced(Archiver):
            async def _checkpoint(self, step: str, chat_id: UUID) -> None:
                if step == "flipped":
                    assert await history(store, chat_id) == before

        result = await Raced(store, archive).archive_chat(chat.chat_id)
        assert result.deleted_rows == 0
        assert (await store.get_chat(chat.chat_id)).status is ChatStatus.ACTIVE
        assert await history(store, chat.chat_id) == before
        await Archiver(store, archive).archive_chat(chat.chat_id)
        await assert_one_verified_object(store, archive, chat.chat_id)

    async def test_archive_idle_takes_idle_active_chats(self, store: Store, archive: Any) -> None:
        """``archive_idle`` archives idle, active, live chats, at most ``limit``."""
        chats = [await _fill(store, thread=f"idle-{i}", n=3) for i in range(3)]
        archiver = Archiver(store, archive)
        assert await archiver.archive_idle(timedelta(days=3650)) == []
        assert await archiver.count_idle(timedelta(0)) >= 3
        taken = await archiver.archive_idle(timedelta(0), limit=2)
        assert len(taken) == 2
        rest = await archiver.archive_idle(timedelta(0))
        ids = {r.chat_id for r in taken + rest}
        assert {c.chat_id for c in chats} <= ids
        assert len(await list_keys(archive)) == len(ids)

    async def test_erase_user_leaves_no_trace(self, store: Store, archive: Any) -> None:
        """``erase_user`` removes hot rows, steps, index records and bundles; counts match."""
        archived = await _fill(store, user="erase-me", thread="a")
        hot = await _fill(store, user="erase-me", thread="b", n=5)
        other = await _fill(store, user="keep-me", thread="a", n=5)
        archiver = Archiver(store, archive)
        await archiver.archive_chat(archived.chat_id)
        await archiver.archive_chat(other.chat_id)
        first_id = UUID(str((await history(store, hot.chat_id))[0]["message_id"]))
        receipt = await store.erase_user("erase-me")
        assert receipt.stores["archive"]["bundles"] == 1
        assert receipt.stores["archive"]["messages"] == 42
        assert receipt.stores["hot"]["chats"] == 2
        assert receipt.stores["hot"]["messages"] == 7
        for chat in (archived, hot):
            assert await stored_chat(store, chat.chat_id) is None
            assert await hot_rows(store, chat.chat_id) == 0
        with pytest.raises(MessageNotFound):
            await store.get_message(first_id)
        assert await list_keys(archive) == [
            ArchiveRef.parse(str((await store.get_chat(other.chat_id)).archive_ref)).key
        ]
        assert len(await history(store, other.chat_id)) == 6

    async def test_purge_removes_bundles(self, store: Store, archive: Any) -> None:
        """``purge`` deletes the bundles of the chats it removes."""
        chat = await _fill(store, n=4)
        await Archiver(store, archive).archive_chat(chat.chat_id)
        deleted = await store.delete_chat(chat.chat_id)
        assert deleted.deleted_at is not None
        assert await store.purge(deleted.deleted_at + timedelta(seconds=1)) == 1
        assert await list_keys(archive) == []

    async def test_damaged_bundle_is_refused(self, store: Store, archive: Any) -> None:
        """A bundle changed after archiving raises ``ArchiveIntegrityError``; nothing shows."""
        chat = await _fill(store, n=4)
        result = await Archiver(store, archive).archive_chat(chat.chat_id)
        ref = ArchiveRef.parse(result.archive_ref)
        head = await archive.head(ref.key)
        body = bytearray(await read_object(archive, ref.key))
        body[len(body) // 2] ^= 0xFF

        async def damaged() -> Any:
            yield bytes(body)

        await archive.put(ref.key, damaged(), metadata=head.metadata, if_match=head.etag)
        with pytest.raises(ArchiveIntegrityError):
            await store.list_messages(chat.chat_id)
        assert (await store.get_chat(chat.chat_id)).status is ChatStatus.ARCHIVED

    @pytest.mark.parametrize("read_between", [False, True], ids=["rerun", "read-then-rerun"])
    @pytest.mark.parametrize("step", STEPS)
    async def test_crash_after_each_step(
        self, store: Store, archive: Any, step: str, read_between: bool
    ) -> None:
        """A crash after any step leaves every message readable; a re-run finishes."""
        chat = await _fill(store)
        before = await history(store, chat.chat_id)
        with pytest.raises(SimulatedCrash):
            await CrashingArchiver(store, archive, step).archive_chat(chat.chat_id)
        if read_between:
            assert await history(store, chat.chat_id) == before
        await Archiver(store, archive).archive_chat(chat.chat_id)
        await assert_one_verified_object(store, archive, chat.chat_id)
        assert await history(store, chat.chat_id) == before

    @pytest.mark.parametrize(
        "fault", ["head_404_after_put", "timeout_after_put", "corrupt_put", "fail_get", "fail_put"]
    )
    @pytest.mark.parametrize("read_between", [False, True], ids=["rerun", "read-then-rerun"])
    async def test_archive_faults(
        self, store: Store, archive: Any, fault: str, read_between: bool
    ) -> None:
        """Each archive fault leaves every message readable; a re-run ends verified."""
        chat = await _fill(store)
        before = await history(store, chat.chat_id)
        faulty = FaultyArchive(archive)
        faulty.arm(fault)
        if fault in ("head_404_after_put", "corrupt_put"):  # verify fails; the call retries
            await Archiver(store, faulty).archive_chat(chat.chat_id)
        else:
            with pytest.raises(InjectedFault):
                await Archiver(store, faulty).archive_chat(chat.chat_id)
        assert faulty.fired[fault] == 1
        if read_between:
            assert await history(store, chat.chat_id) == before
        await Archiver(store, faulty).archive_chat(chat.chat_id)
        await assert_one_verified_object(store, archive, chat.chat_id)
        assert await history(store, chat.chat_id) == before

    async def test_rehydrate_fault_keeps_chat_archived(
        self, store: Store, archive: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A failing download during a read raises and leaves the chat archived, intact."""
        chat = await _fill(store)
        before = await history(store, chat.chat_id)
        await Archiver(store, archive).archive_chat(chat.chat_id)
        faulty = FaultyArchive(archive)
        faulty.arm("fail_get")
        with monkeypatch.context() as patch:
            _lend(patch, faulty)
            with pytest.raises(BackendUnavailable):
                await store.list_messages(chat.chat_id)
        assert (await store.get_chat(chat.chat_id)).status is ChatStatus.ARCHIVED
        assert await history(store, chat.chat_id) == before

    async def test_erase_with_failing_delete_can_be_retried(
        self, store: Store, archive: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A failed bundle delete fails ``erase_user`` before the hot chat goes.

        A retry then removes both.
        """
        chat = await _fill(store, user="flaky", n=4)
        await Archiver(store, archive).archive_chat(chat.chat_id)
        faulty = FaultyArchive(archive)
        faulty.arm("fail_delete")
        with monkeypatch.context() as patch:
            _lend(patch, faulty)
            with pytest.raises(InjectedFault):
                await store.erase_user("flaky")
        assert (await store.get_chat(chat.chat_id)).archive_ref is not None
        receipt = await store.erase_user("flaky")
        assert receipt.stores["archive"]["bundles"] == 1
        assert await list_keys(archive) == []


def _lend(monkeypatch: pytest.MonkeyPatch, archive: Any) -> None:
    """Make reads and erasure open ``archive`` (a fault wrapper) instead of the ref's URL."""
    from threadkeep import _store_tiering as _tiered  # where rehydration opens the archive

    monkeypatch.setattr(_tiered, "open_archive", lambda url, **options: _Borrowed(archive))


class _Borrowed:
    """An async context manager lending an already open archive (not closed on exit)."""

    def __init__(self, archive: Any) -> None:
        self.archive = archive

    async def __aenter__(self) -> Any:
        return self.archive

    async def __aexit__(self, *exc: object) -> None:
        return None
