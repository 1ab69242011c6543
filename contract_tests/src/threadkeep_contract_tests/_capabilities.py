"""Capability consistency: every declared capability is really implemented (issue 3, item 2).

Undeclared capabilities must refuse cleanly: ``steps=False`` and ``archive=False`` raise
``CapabilityNotSupported`` rather than half-working. Claims with nothing to refuse
(``persistent=False``...) skip, naming the capability.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import pytest

from threadkeep import Capabilities, CapabilityNotSupported, Message, Step, Store, ToolCall

from ._base import ContractBase, StoreFactory, require_capability
from ._helpers import body_of, opened, walk_messages

__all__ = ["CapabilityTests"]


@contextmanager
def _claim(capability: str, declared: bool = True) -> Iterator[None]:
    """Name the capability claim a failing check was testing, in the failure's message.

    A bare assertion (``assert 7 == 8``), pytest's ``DID NOT RAISE`` or an error the store
    raised (``ChatNotFound`` from a "persistent" store that forgot) does not say that the
    driver's ``Capabilities`` promised otherwise: the failure now starts with the claim (the
    original is chained as its cause).
    """
    try:
        yield
    except (Exception, pytest.fail.Exception) as exc:
        claim = (
            f"the driver declares capability {capability!r} (Capabilities.{capability}=True)"
            if declared
            else f"the driver does not declare capability {capability!r}, so its operations "
            "must raise CapabilityNotSupported"
        )
        raise AssertionError(f"{claim}, but the check failed: {exc}") from exc


async def _assert_all_found(store: Store, sent: list[Message]) -> None:
    for message in sent:
        assert (await store.get_message(message.message_id)).message_id == message.message_id
        call = await store.get_tool_call(message.tool_calls[0].tool_call_id)
        assert call.agui_id == message.tool_calls[0].agui_id


class CapabilityTests(ContractBase):
    """Each capability a driver declares matches what it does."""

    contract_area: ClassVar[str] = "Capability consistency"

    @pytest.mark.asyncio
    async def test_capabilities_are_declared(self, store: Store) -> None:
        """The driver declares ``capabilities`` (a ``Capabilities``) and URL schemes."""
        declared = store.capabilities
        assert isinstance(declared, Capabilities)
        assert isinstance(getattr(store.driver, "capabilities", declared), Capabilities)
        assert store.schemes, "a driver declares the URL schemes it serves"
        assert all(isinstance(v, bool) for k, v in declared.model_dump().items() if k != "notes")

    @pytest.mark.asyncio
    async def test_steps_capability_matches(self, store: Store, capabilities: Capabilities) -> None:
        """``steps=True``: steps round-trip; ``False``: they raise ``CapabilityNotSupported``."""
        chat = await store.create_chat("u-cap", "t-steps")
        step = Step(chat_id=chat.chat_id, run_id="r", stack_id="s", type="llm")
        with _claim("steps", declared=capabilities.steps):
            if capabilities.steps:
                (stored,) = await store.save_steps([step])
                assert (await store.get_step(step.step_id)).seq == stored.seq
                assert [s.step_id for s in await store.get_steps(chat.chat_id, "r")] == [
                    step.step_id
                ]
                return
            with pytest.raises(CapabilityNotSupported):
                await store.save_steps([step])
            with pytest.raises(CapabilityNotSupported):
                await store.get_steps(chat.chat_id, "r")
            with pytest.raises(CapabilityNotSupported):
                await store.start_run(chat.chat_id, "r", owner="w")

    @pytest.mark.asyncio
    async def test_archive_capability_matches(
        self, store: Store, capabilities: Capabilities
    ) -> None:
        """``archive=True``: hot rows scan; ``archive=False``: the primitives refuse cleanly."""
        chat = await store.create_chat("u-cap", "t-archive")
        stored = await store.append_message(chat.chat_id, Message(role="user", content="x"))
        with _claim("archive", declared=capabilities.archive):
            if capabilities.archive:
                scanned = await store.primitives.scan_messages(chat.chat_id, 0, 10)
                assert [m.message_id for m in scanned] == [stored.message_id]
                return
            with pytest.raises(CapabilityNotSupported):
                await store.primitives.scan_messages(chat.chat_id, 0, 10)
            with pytest.raises(CapabilityNotSupported):
                await store.primitives.restore_messages(chat.chat_id, [stored])

    @pytest.mark.asyncio
    async def test_persistent_capability_holds(
        self, store_factory: StoreFactory, capabilities: Capabilities
    ) -> None:
        """``persistent=True``: everything written survives closing and reopening the store."""
        require_capability(capabilities, "persistent")
        with _claim("persistent"):
            async with opened(store_factory) as first:
                chat = await first.create_chat("u-cap", "t-persist", name="kept")
                sent = [
                    Message(role="user", agui_id=f"p{i}", content=f"c{i}\x00") for i in range(9)
                ]
                await first.append_messages(chat.chat_id, sent)
                await first.delete_messages(chat.chat_id, [sent[4].message_id])
                before = await walk_messages(first, chat.chat_id, limit=4)
            async with opened(store_factory) as second:
                assert (await second.get_chat(chat.chat_id)).name == "kept"
                after = await walk_messages(second, chat.chat_id, limit=4)
                retried = await second.append_message(chat.chat_id, sent[0])
            assert [(m.seq, body_of(m)) for m in after.items] == [
                (m.seq, body_of(m)) for m in before.items
            ]
            assert len(after.items) == 8
            assert retried.message_id == sent[0].message_id

    @pytest.mark.asyncio
    async def test_concurrent_processes_capability_holds(
        self, store_factory: StoreFactory, capabilities: Capabilities
    ) -> None:
        """``concurrent_processes=True``: two open instances share writes, cursors and seqs."""
        require_capability(capabilities, "concurrent_processes")
        with _claim("concurrent_processes"):
            async with opened(store_factory) as one, opened(store_factory) as two:
                chat = await one.create_chat("u-cap", "t-two")
                assert (await two.create_chat("u-cap", "t-two")).chat_id == chat.chat_id
                sends = [Message(role="user", content=f"x{i}") for i in range(20)]
                await asyncio.gather(
                    *(
                        (one if i % 2 else two).append_message(chat.chat_id, m)
                        for i, m in enumerate(sends)
                    )
                )
                cursor = (await one.list_messages(chat.chat_id, limit=5)).next_cursor
                page = await two.list_messages(chat.chat_id, limit=5, cursor=cursor)
                walk = await walk_messages(two, chat.chat_id, limit=6)
            assert len(page.items) == 5
            assert sorted(m.message_id for m in walk.items) == sorted(m.message_id for m in sends)

    @pytest.mark.asyncio
    async def test_strong_uuid_lookup_holds(
        self, store_factory: StoreFactory, capabilities: Capabilities
    ) -> None:
        """``strong_uuid_lookup=True``: every committed message and tool call is found by uuid.

        With ``concurrent_processes`` the lookups go through a second open instance.
        """
        require_capability(capabilities, "strong_uuid_lookup")
        with _claim("strong_uuid_lookup"):
            async with opened(store_factory) as writer:
                chat = await writer.create_chat("u-cap", "t-lookup")
                sent = [
                    Message(role="assistant", tool_calls=[ToolCall(agui_id=f"c{i}")])
                    for i in range(30)
                ]
                await asyncio.gather(*(writer.append_message(chat.chat_id, m) for m in sent))
                if capabilities.concurrent_processes:
                    async with opened(store_factory) as reader:
                        await _assert_all_found(reader, sent)
                else:
                    await _assert_all_found(writer, sent)

    @pytest.mark.asyncio
    async def test_transactions_capability_holds(
        self, store: Store, capabilities: Capabilities
    ) -> None:
        """``transactions=True``: a reader never sees part of a batch while it commits."""
        require_capability(capabilities, "transactions")
        with _claim("transactions"):
            chat = await store.create_chat("u-cap", "t-tx")
            seen: list[int] = []

            async def writer() -> None:
                for round_ in range(10):
                    await store.append_messages(
                        chat.chat_id,
                        [Message(role="user", content=f"{round_}-{i}") for i in range(5)],
                    )

            async def reader() -> None:
                for _ in range(40):
                    seen.append(len((await store.list_messages(chat.chat_id, limit=200)).items))
                    await asyncio.sleep(0)

            await asyncio.gather(writer(), reader())
            assert all(count % 5 == 0 for count in seen), f"a reader saw part of a batch: {seen}"
