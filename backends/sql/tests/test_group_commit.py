"""Group commit on PostgreSQL: concurrent appends share statements, outcomes stay per caller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import pytest

from threadkeep import BackendUnavailable, ChatNotFound, Conflict, IdempotencyConflict, Message
from threadkeep_sql import SqlStore
from threadkeep_sql._group import MAX_INFLIGHT, GroupCommitter


@pytest.fixture
async def pg_store(pg_schema: tuple[str, str]) -> AsyncIterator[SqlStore]:
    url, schema = pg_schema
    store = SqlStore(url, schema=schema)
    await store.open()
    yield store
    await store.close()


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the size of every group statement written (and let it run)."""
    sizes: list[int] = []
    real = GroupCommitter._write_group

    async def counting(self: GroupCommitter, group: list[Any]) -> dict[int, int]:
        sizes.append(len(group))
        return await real(self, group)

    monkeypatch.setattr(GroupCommitter, "_write_group", counting)
    return sizes


CHATS = 12
APPENDS = 200


async def _stored_by_seq(store: SqlStore, chat_id: UUID) -> dict[int, Message]:
    page = await store.list_messages(chat_id, limit=APPENDS)
    return {m.seq: m for m in page.items}


async def test_concurrent_appends_are_coalesced(pg_store: SqlStore, groups: list[int]) -> None:
    chats = [await pg_store.create_chat("u", f"t{n}") for n in range(CHATS)]
    # Runs of a few appends to one chat, then another chat: a group holds many appends of
    # each chat, interleaved with the others'.
    where = [chats[(n // 3) % CHATS].chat_id for n in range(APPENDS)]
    appends = [
        pg_store.append_message(where[n], Message(role="user", agui_id=f"a{n}", content=str(n)))
        for n in range(APPENDS)
    ]
    returned = await asyncio.gather(*appends)
    # The first MAX_INFLIGHT appends run alone; the rest, queued behind them, go in one
    # statement.
    assert groups == [APPENDS - MAX_INFLIGHT]
    assert [(m.chat_id, m.content, m.agui_id) for m in returned] == [
        (where[n], str(n), f"a{n}") for n in range(APPENDS)
    ]
    for chat in chats:
        stored = await _stored_by_seq(pg_store, chat.chat_id)
        mine = [(n, m) for n, m in enumerate(returned) if m.chat_id == chat.chat_id]
        # Every caller got exactly the row the store holds at its seq, and seqs have no gaps.
        assert sorted(stored) == list(range(1, len(mine) + 1))
        for _, message in mine:
            assert stored[message.seq] == message
        # Within the group, a chat's seqs follow the order its appends arrived in (the
        # lone appends before it race each other and the group, as without grouping).
        queued = [m.seq for n, m in mine if n >= MAX_INFLIGHT]
        assert queued == sorted(queued)
        # A lone append that took its time before the group's but commits after it sets
        # last_message_at to its own time: last_message_at is one of the chat's messages'.
        last = (await pg_store.get_chat(chat.chat_id)).last_message_at
        assert last in {m.updated_at for _, m in mine}


class _Gate:
    """Holds every lone append of a store until opened (appends past it queue)."""

    def __init__(self, store: SqlStore) -> None:
        committer = store.driver._group
        assert committer is not None
        self.committer = committer
        self.open = asyncio.Event()
        real = committer._lone

        async def held(*args: Any) -> int | None:
            await self.open.wait()
            return await real(*args)

        committer._lone = held

    async def until_queued(self, count: int) -> None:
        for _ in range(3000):  # up to 30 s on a loaded machine
            if len(self.committer._queue) >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{count} appends never queued")


def _start(store: SqlStore, chat_id: UUID, count: int) -> list[asyncio.Task[Message]]:
    return [
        asyncio.ensure_future(
            store.append_message(chat_id, Message(role="user", agui_id=f"q{n}", content=str(n)))
        )
        for n in range(count)
    ]


async def test_a_caller_cancelled_while_queued_touches_no_other_caller(
    pg_store: SqlStore, groups: list[int]
) -> None:
    chat = await pg_store.create_chat("u", "cancel")
    gate = _Gate(pg_store)
    tasks = _start(pg_store, chat.chat_id, MAX_INFLIGHT + 6)
    await gate.until_queued(6)
    victim = MAX_INFLIGHT + 2
    tasks[victim].cancel()
    await asyncio.sleep(0.05)
    gate.open.set()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    # Writes run to completion under cancellation (issue 12): the victim's append is
    # written with its group, then the victim sees its cancellation, and only it.
    assert isinstance(outcomes[victim], asyncio.CancelledError)
    assert groups == [6]
    stored = await _stored_by_seq(pg_store, chat.chat_id)
    assert sorted(stored) == list(range(1, MAX_INFLIGHT + 7))
    assert sorted(m.content for m in stored.values()) == sorted(
        str(n) for n in range(MAX_INFLIGHT + 6)
    )
    for n, message in enumerate(outcomes):
        if n != victim:
            assert isinstance(message, Message), (n, message)
            assert stored[message.seq] == message
    queued = [stored_seq for stored_seq, m in stored.items() if int(m.content) >= MAX_INFLIGHT]
    assert [int(stored[s].content) for s in sorted(queued)] == list(
        range(MAX_INFLIGHT, MAX_INFLIGHT + 6)
    )


async def test_close_writes_the_queued_appends_first(pg_store: SqlStore, groups: list[int]) -> None:
    chat = await pg_store.create_chat("u", "closing")
    gate = _Gate(pg_store)
    tasks = _start(pg_store, chat.chat_id, MAX_INFLIGHT + 10)
    await gate.until_queued(10)
    closing = asyncio.ensure_future(pg_store.close())
    await asyncio.sleep(0.05)
    assert not closing.done()  # it waits for the appends in flight and queued
    gate.open.set()
    returned = await asyncio.gather(*tasks)
    await closing
    assert groups == [10]
    await pg_store.open()
    stored = await _stored_by_seq(pg_store, chat.chat_id)
    assert sorted(stored) == list(range(1, MAX_INFLIGHT + 11))
    for message in returned:
        assert stored[message.seq] == message


async def test_a_failing_group_retries_each_append_alone(
    pg_store: SqlStore, groups: list[int]
) -> None:
    chat = await pg_store.create_chat("u", "mixed")
    gone = await pg_store.create_chat("u", "gone")
    await pg_store.delete_chat(gone.chat_id)
    taken = await pg_store.append_message(chat.chat_id, Message(role="user", content="first"))
    await pg_store.append_message(chat.chat_id, Message(role="user", agui_id="d", content="v1"))
    groups.clear()
    k = MAX_INFLIGHT  # appends 0..k-1 are sent alone; k..k+7 queue
    special = {
        k + 1: (chat.chat_id, Message(role="user", content="x", message_id=taken.message_id)),
        k + 2: (gone.chat_id, Message(role="user", content="to a deleted chat")),
        k + 3: (chat.chat_id, Message(role="user", agui_id="d", content="v2")),
        k + 6: (chat.chat_id, Message(role="user", agui_id="d", content="v1")),
    }

    async def one(n: int) -> Message:
        default = (chat.chat_id, Message(role="user", agui_id=f"ok{n}", content=str(n)))
        chat_id, message = special.get(n, default)
        return await pg_store.append_message(chat_id, message)

    outcomes = await asyncio.gather(*(one(n) for n in range(k + 8)), return_exceptions=True)
    # k + 6 repeats k + 3's agui_id, so it waits for the next group (where it is alone). The
    # taken message_id fails the group statement as a whole; every append of it is then
    # written alone, so only its caller sees the Conflict.
    assert groups == [7]
    assert isinstance(outcomes[k + 1], Conflict)
    assert isinstance(outcomes[k + 2], ChatNotFound)
    assert isinstance(outcomes[k + 3], IdempotencyConflict)
    retry = outcomes[k + 6]
    assert isinstance(retry, Message)
    assert retry.content == "v1"
    for n in [*range(k + 1), k + 4, k + 5, k + 7]:
        outcome = outcomes[n]
        assert isinstance(outcome, Message), (n, outcome)
        assert outcome.content == str(n)
    # The failed group's appends to one chat are retried one after another, in arrival order.
    retried = [outcomes[n] for n in (k, k + 4, k + 5, k + 7)]
    seqs = [m.seq for m in retried if isinstance(m, Message)]
    assert seqs == sorted(seqs)
    page = await pg_store.list_messages(chat.chat_id, limit=200)
    assert len(page.items) == 2 + k + 4
    assert len({m.message_id for m in page.items}) == 2 + k + 4


async def test_a_retry_never_shares_a_group_with_its_original(
    pg_store: SqlStore, groups: list[int]
) -> None:
    chat = await pg_store.create_chat("u", "retries")
    first, *rest = await asyncio.gather(
        pg_store.append_message(chat.chat_id, Message(role="user", content="lead")),
        *(
            pg_store.append_message(chat.chat_id, Message(role="user", agui_id="r", content="x"))
            for _ in range(5)
        ),
    )
    assert first.content == "lead"
    assert len({m.message_id for m in rest}) == 1
    page = await pg_store.list_messages(chat.chat_id, limit=200)
    assert [m.content for m in page.items] == ["lead", "x"]
    # One "r" per group: the four repeats are retries in later groups (or alone).
    assert sum(groups) <= 5


async def test_a_cancelled_group_leaves_no_caller_waiting(
    pg_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = await pg_store.create_chat("u", "stuck")
    stuck = asyncio.Event()

    async def hangs(self: GroupCommitter, group: list[Any]) -> dict[int, int]:
        stuck.set()
        await asyncio.Event().wait()  # a statement that never comes back
        raise AssertionError("unreachable")

    monkeypatch.setattr(GroupCommitter, "_write_group", hangs)
    tasks = _start(pg_store, chat.chat_id, MAX_INFLIGHT + 5)
    await asyncio.wait_for(stuck.wait(), timeout=30)
    committer = pg_store.driver._group
    assert committer is not None
    for drainer in list(committer._drainers):
        drainer.cancel()
    outcomes = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
    # The lone appends are written; each append of the cancelled group gets its own
    # BackendUnavailable (it may or may not be written) instead of waiting forever.
    assert all(isinstance(o, Message) for o in outcomes[:MAX_INFLIGHT])
    assert all(isinstance(o, BackendUnavailable) for o in outcomes[MAX_INFLIGHT:])
    await committer.close()
    assert not committer._queue
    assert committer._inflight == 0
