"""Batches over the service's 200-event limit commit whole or not at all, for every reader,
also when a part fails, when the writer dies between parts, or another writer cuts in."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from uuid import UUID

import pytest

from threadkeep import BackendUnavailable, Message, MessageNotFound, ThreadkeepError
from threadkeep_memservice import MemServiceStore
from threadkeep_memservice.emulator import Event, FaultAction, FaultRule, MemoryService

from .backdoor import all_events, raw_messages

COUNT = 1000


def _batch(tag: str = "b", count: int = COUNT) -> list[Message]:
    return [Message(role="user", agui_id=f"{tag}{i}", content=f"{tag}{i}") for i in range(count)]


def _nth_create(n: int, reached: asyncio.Event | None = None) -> Any:
    """A predicate true for the n-th ``create_events`` call it sees (1-based); sets ``reached``."""
    seen = [0]

    def when(args: Mapping[str, Any]) -> bool:
        seen[0] += 1
        if seen[0] == n and reached is not None:
            reached.set()
        return seen[0] == n

    return when


def _commit_part(args: Mapping[str, Any]) -> bool:
    return any(e.event_type == "commit" for e in args["events"])


async def _events(store: MemServiceStore, chat_id: UUID) -> list[Event]:
    session_id = await store.driver.registry.resolve(chat_id)
    assert session_id is not None
    return await all_events(store.driver.service, store.driver.space_id, session_id)


async def _nothing_visible(store: MemServiceStore, chat_id: UUID, sent: list[Message]) -> None:
    """No read path shows any message of ``sent``."""
    assert (await store.list_messages(chat_id, limit=200)).items == []
    assert await store.context_messages(chat_id) == []
    assert await store.get_message_by_agui_id(chat_id, sent[0].agui_id or "") is None
    assert await store.get_message_by_agui_id(chat_id, sent[-1].agui_id or "") is None
    with pytest.raises(MessageNotFound):
        await store.get_message(sent[0].message_id)
    assert await raw_messages(store, chat_id) == []


async def _all_stored_once(store: MemServiceStore, chat_id: UUID, sent: list[Message]) -> None:
    everything = await store.context_messages(chat_id)
    assert [m.content for m in everything] == [m.content for m in sent]
    seqs = [m.seq or 0 for m in everything]
    assert seqs == sorted(set(seqs)), "seqs not strictly increasing"
    heads = [
        e
        for e in await _events(store, chat_id)
        if e.event_type == "message" and e.body["cols"]["deleted_at"] is None  # not hidden
    ]
    assert len(heads) == len(sent), "staged leftovers or duplicates remain"
    assert len([r for r in await raw_messages(store, chat_id) if not r.hidden]) == len(sent)


@pytest.fixture
def service() -> MemoryService:
    return MemoryService()


async def test_a_batch_of_1000_messages_and_large_ones_commits_whole(
    service: MemoryService,
) -> None:
    big = "x" * (1024 * 1024 + 17)  # two chunk events each
    sent = [*_batch(count=400), Message(role="assistant", content=big), *_batch("c", 600)]
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        stored = await store.append_messages(chat.chat_id, sent)
        assert [m.message_id for m in stored] == [m.message_id for m in sent]
        assert service.calls["create_events"] >= 6  # it really went in parts
        await _all_stored_once(store, chat.chat_id, sent)
        again = await store.append_messages(chat.chat_id, sent[:401])  # a retry stores nothing
        assert [m.seq for m in again] == [m.seq for m in stored[:401]]
    async with MemServiceStore("memservice://", service=service) as replica:  # cold caches
        page = await replica.list_messages(chat.chat_id, limit=200)
        assert [m.content for m in page.items] == [m.content for m in sent[-200:]]
        assert (await replica.get_message(stored[400].message_id)).content == big  # type: ignore[union-attr]


async def test_a_failed_part_leaves_nothing_behind(service: MemoryService) -> None:
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        sent = _batch()
        service.faults.add(FaultRule("create_events", FaultAction.FAIL, when=_nth_create(3)))
        with pytest.raises(BackendUnavailable):
            await store.append_messages(chat.chat_id, sent)
        await _nothing_visible(store, chat.chat_id, sent)
        assert [e for e in await _events(store, chat.chat_id) if e.event_type == "message"] == []
        await store.append_messages(chat.chat_id, sent)
        await _all_stored_once(store, chat.chat_id, sent)


async def test_a_writer_dying_between_parts_leaves_the_batch_invisible_until_resent(
    service: MemoryService,
) -> None:
    """The writer is cancelled inside its third call: like a crash, it cleans nothing up."""
    name = "crash"
    stalled = asyncio.Event()
    stall = FaultRule("create_events", FaultAction.SLOW, when=_nth_create(3, stalled), delay=3600)
    service.faults.add(stall)
    sent = _batch()
    async with MemServiceStore(f"memservice://{name}", service=service) as writer:
        chat = await writer.create_chat("u", "t")
        task = asyncio.create_task(writer.append_messages(chat.chat_id, sent))
        await stalled.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    staged = [e for e in await _events(writer, chat.chat_id) if e.event_type == "message"]
    assert len(staged) == 2 * 200, "the crash did not leave two staged parts"
    async with MemServiceStore(f"memservice://{name}", service=service) as replica:
        await _nothing_visible(replica, chat.chat_id, sent)
        other = await replica.append_message(chat.chat_id, Message(role="user", content="later"))
        assert [m.content for m in (await replica.list_messages(chat.chat_id)).items] == ["later"]
        await replica.delete_messages(chat.chat_id, [other.message_id])
        stored = await replica.append_messages(chat.chat_id, sent)  # the retry after a crash
        assert all((m.seq or 0) > (other.seq or 0) for m in stored)
        await _all_stored_once(replica, chat.chat_id, sent)


async def test_a_lost_answer_of_the_commit_part_is_a_commit(service: MemoryService) -> None:
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        sent = _batch()
        lost = FaultRule("create_events", FaultAction.TIMEOUT, when=_commit_part, applied=True)
        service.faults.add(lost)
        with pytest.raises(BackendUnavailable, match="may have happened"):
            await store.append_messages(chat.chat_id, sent)
        service.faults.remove(lost)
        assert len(await store.context_messages(chat.chat_id)) == COUNT  # it did commit
        retried = await store.append_messages(chat.chat_id, sent)
        assert [m.content for m in retried] == [m.content for m in sent]
        await _all_stored_once(store, chat.chat_id, sent)


async def test_a_writer_cutting_in_between_parts_makes_the_batch_start_over(
    service: MemoryService,
) -> None:
    """Readers never see part of the batch; the cut-in message sorts before all of it."""
    slowed, released = asyncio.Event(), asyncio.Event()
    slow = FaultRule("create_events", FaultAction.SLOW, when=_nth_create(2, slowed), hold=released)
    async with (
        MemServiceStore("memservice://cut", service=service) as writer,
        MemServiceStore("memservice://cut", service=service) as other,
    ):
        chat = await writer.create_chat("u", "t")
        sent = _batch()
        service.faults.add(slow)
        task = asyncio.create_task(writer.append_messages(chat.chat_id, sent))
        await slowed.wait()
        assert (await other.list_messages(chat.chat_id)).items == []  # part 1 is staged
        cut_in = await other.append_message(chat.chat_id, Message(role="user", content="first"))
        released.set()  # part 2 goes on only now: the cut-in is in whatever the load
        stored = await task
        assert all((m.seq or 0) > (cut_in.seq or 0) for m in stored)
        everything = await other.context_messages(chat.chat_id)
        assert [m.content for m in everything] == ["first"] + [m.content for m in sent]
        heads = [e for e in await _events(writer, chat.chat_id) if e.event_type == "message"]
        assert len(heads) == COUNT + 1, "the abandoned first attempt left staged events"


async def test_retried_big_batches_under_random_faults_store_each_message_once() -> None:
    """8 % of all calls fail or lose their answer; retried 450-message batches land once each."""
    service = MemoryService(seed=1)
    faults = [
        FaultRule("*", FaultAction.FAIL, probability=0.05),
        FaultRule("*", FaultAction.TIMEOUT, applied=True, probability=0.03),
    ]

    async def retry(call: Any, *args: Any) -> Any:
        for _ in range(100):
            try:
                return await call(*args)
            except ThreadkeepError:
                continue
        pytest.fail("100 retries did not get through 8 % faults")

    store = MemServiceStore("memservice://", service=service, faults=faults)
    await retry(store.open)
    try:
        chat = await retry(store.create_chat, "u", "t")
        sent = [*_batch("x", 450), *_batch("y", 450)]
        await retry(store.append_messages, chat.chat_id, sent[:450])
        await retry(store.append_messages, chat.chat_id, sent[450:])
    finally:
        await store.close()
    assert sum(rule.fired for rule in faults) > 20
    async with MemServiceStore("memservice://", service=service) as clean:
        await _all_stored_once(clean, chat.chat_id, sent)


async def test_concurrent_replicas_appending_big_batches_never_show_half_of_one(
    service: MemoryService,
) -> None:
    """Two replicas append 250-message batches while a third appends small ones and a
    fourth keeps reading: every read shows each batch whole or not at all, in seq order;
    at the end every message is stored once and each batch is contiguous and in order."""
    service.faults.add(FaultRule("create_events", FaultAction.SLOW, delay=0.002))  # interleave
    sizes: dict[str, int] = {}
    seen_partial: list[tuple[str, int]] = []
    done = asyncio.Event()

    def tag_of(message: Message) -> str:
        return (message.content or "").split("-")[0]

    async def write(store: MemServiceStore, chat_id: UUID, name: str, size: int) -> None:
        for round_ in range(2):
            tag = f"{name}r{round_}"
            sizes[tag] = size
            await store.append_messages(
                chat_id,
                [
                    Message(role="user", agui_id=f"{tag}-{i}", content=f"{tag}-{i}")
                    for i in range(size)
                ],
            )

    async def read(store: MemServiceStore, chat_id: UUID) -> None:
        while not done.is_set():
            messages = await store.context_messages(chat_id)
            assert [m.seq for m in messages] == sorted(m.seq or 0 for m in messages)
            counts: dict[str, int] = {}
            for message in messages:
                counts[tag_of(message)] = counts.get(tag_of(message), 0) + 1
            seen_partial.extend((t, n) for t, n in counts.items() if n != sizes[t])
            await asyncio.sleep(0)

    stores = [MemServiceStore("memservice://many", service=service) for _ in range(4)]
    for store in stores:
        await store.open()
    try:
        chat = await stores[0].create_chat("u", "t")
        reader = asyncio.create_task(read(stores[3], chat.chat_id))
        await asyncio.gather(
            write(stores[0], chat.chat_id, "a", 250),
            write(stores[1], chat.chat_id, "b", 250),
            write(stores[2], chat.chat_id, "c", 3),
        )
        done.set()
        await reader
        assert seen_partial == []
        everything = await stores[3].context_messages(chat.chat_id)
        assert len(everything) == sum(sizes.values())
        tags = [tag_of(m) for m in everything]
        starts = [t for i, t in enumerate(tags) if i == 0 or tags[i - 1] != t]
        assert sorted(starts) == sorted(sizes), "a batch is not contiguous"
        assert [m.content for m in everything] == [
            f"{t}-{i}" for t in starts for i in range(sizes[t])
        ]
    finally:
        for store in stores:
            await store.close()
