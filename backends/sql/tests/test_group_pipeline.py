"""Group commit with two statements in flight: large groups pipeline, chats keep their order."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import pytest

from threadkeep import Message
from threadkeep_sql import SqlStore
from threadkeep_sql._group import PIPELINE_MESSAGES, GroupCommitter

from .test_group_commit import pg_store  # noqa: F401 - the fixture: a store on PostgreSQL

HANG = 120  # seconds: a hang guard, never a timing assertion
TURN = 5
N = PIPELINE_MESSAGES // TURN + 1
"""Turns of TURN messages that make a group large enough to go beside another."""


class Statements:
    """Records every statement a store's committer sends (lone calls and groups).

    For each: its chats and message count, and the chats of every other statement in
    flight when it started. ``hold`` (a statement's number, from 0) makes that statement
    wait for ``release`` before (``before=True``) or after its real write.
    """

    def __init__(self, store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
        committer = store.driver._group
        assert committer is not None
        self.committer: GroupCommitter = committer
        self.started: list[tuple[frozenset[UUID], int]] = []
        self.beside: list[frozenset[UUID]] = []  # per statement: chats of the others in flight
        self.inflight: dict[int, frozenset[UUID]] = {}
        self.arrivals: list[tuple[UUID, str | None]] = []
        self.held: dict[int, bool] = {}  # statement number -> wait before its write?
        self.waiting = 0
        self.release = asyncio.Event()
        self.done: list[int] = []
        self.finished = asyncio.Condition()
        real_lone, real_append = committer._lone, committer.append
        real_group = GroupCommitter._write_group

        async def lone(chat_id: UUID, items: Sequence[Any], now: Any) -> int | None:
            return await self._run([(chat_id, len(items))], real_lone(chat_id, items, now))

        async def group(owner: GroupCommitter, calls: list[Any]) -> dict[int, int]:
            shape = [(call.chat_id, len(call.items)) for call in calls]
            return await self._run(shape, real_group(owner, calls))

        async def append(chat_id: UUID, items: Sequence[Any], *args: Any, **kw: Any) -> Any:
            self.arrivals.append((chat_id, items[0].message.agui_id))
            return await real_append(chat_id, items, *args, **kw)

        committer._lone = lone
        committer.append = append  # type: ignore[method-assign]
        monkeypatch.setattr(GroupCommitter, "_write_group", group)

    def hold(self, number: int, *, before: bool) -> None:
        self.held[number] = before

    async def _run(self, shape: list[tuple[UUID, int]], write: Any) -> Any:
        number = len(self.started)
        chats = frozenset(chat_id for chat_id, _ in shape)
        self.started.append((chats, sum(size for _, size in shape)))
        self.beside.append(frozenset().union(*self.inflight.values()))
        self.inflight[number] = chats
        try:
            if self.held.get(number) is True:
                await self._wait()
            result = await write
            if self.held.get(number) is False:
                await self._wait()
            return result
        finally:
            del self.inflight[number]
            async with self.finished:
                self.done.append(number)
                self.finished.notify_all()

    async def _wait(self) -> None:
        self.waiting += 1
        await asyncio.wait_for(self.release.wait(), HANG)

    async def until(self, check: Any) -> None:
        async with self.finished:
            await asyncio.wait_for(self.finished.wait_for(check), HANG)

    async def until_waiting(self, count: int) -> None:
        for _ in range(HANG * 100):
            if self.waiting >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{count} statements never reached the gate")

    def assert_no_chat_twice_in_flight(self) -> None:
        for (chats, _), others in zip(self.started, self.beside, strict=True):
            assert chats.isdisjoint(others), (chats, others)


def _turn(tag: str) -> list[Message]:
    return [Message(role="user", agui_id=f"{tag}-{j}", content=f"{tag} {j}") for j in range(TURN)]


async def _seqs(store: SqlStore, chat_id: UUID) -> list[str | None]:
    page = await store.list_messages(chat_id, limit=500)
    assert [m.seq for m in page.items] == list(range(1, len(page.items) + 1))
    return [m.agui_id for m in page.items]


async def test_a_chat_written_by_a_statement_in_flight_waits_and_keeps_its_order(
    pg_store: SqlStore,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = (await pg_store.create_chat("u", "x")).chat_id
    ys = [(await pg_store.create_chat("u", f"y{n}")).chat_id for n in range(N)]
    log = Statements(pg_store, monkeypatch)
    log.hold(0, before=True)  # the lead to x: not written until the group beside it is
    lead = asyncio.ensure_future(pg_store.append_message(x, Message(role="user", agui_id="lead")))
    await log.until_waiting(1)
    # Turns to x and to other chats, interleaved, each side past the threshold: with x
    # in flight, only the others' turns may go beside it (else x's later turns would be
    # written before its lead).
    turns: list[tuple[UUID, str]] = []
    for n in range(N):
        turns += [(x, f"x{n}"), (ys[n], f"y{n}")]
    tasks = [
        asyncio.ensure_future(pg_store.append_messages(chat_id, _turn(tag)))
        for chat_id, tag in turns
    ]
    await log.until(lambda: 1 in log.done)  # the group beside the held lead came back
    log.release.set()
    await asyncio.wait_for(asyncio.gather(lead, *tasks), HANG)
    assert await _seqs(pg_store, x) == ["lead"] + [
        f"x{n}-{j}" for n in range(N) for j in range(TURN)
    ]
    log.assert_no_chat_twice_in_flight()
    assert log.started[1] == (frozenset(ys), N * TURN)  # went beside the lead, without x
    assert log.beside[1] == {x}
    assert log.started[2] == (frozenset({x}), N * TURN)
    for n, y in enumerate(ys):
        assert await _seqs(pg_store, y) == [f"y{n}-{j}" for j in range(TURN)]


async def test_a_large_queue_goes_as_two_groups_of_whole_chats(
    pg_store: SqlStore,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lead_chat = (await pg_store.create_chat("u", "lead")).chat_id
    cs = [(await pg_store.create_chat("u", f"c{n}")).chat_id for n in range(N)]
    ds = [(await pg_store.create_chat("u", f"d{n}")).chat_id for n in range(2 * N)]
    log = Statements(pg_store, monkeypatch)
    log.hold(0, before=False)  # both in flight, written, held back from their callers
    log.hold(1, before=False)
    first = [asyncio.ensure_future(pg_store.append_message(lead_chat, Message(role="user")))]
    first += [asyncio.ensure_future(pg_store.append_messages(c, _turn("c"))) for c in cs]
    await log.until_waiting(2)
    # Both statements in flight: these queue. When both return in one loop iteration,
    # nothing is in flight and the queue (past twice the threshold) goes as two groups at
    # once, split into whole chats, about half the messages each.
    # Each d chat gets two turns, one early and one late in the queue: a chat's turns
    # stay in one group, in order.
    order = [(d, f"{n}a") for n, d in enumerate(ds)] + [(d, f"{n}b") for n, d in enumerate(ds)]
    tasks = [asyncio.ensure_future(pg_store.append_messages(d, _turn(tag))) for d, tag in order]
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(log.started) == 2
    log.release.set()
    await asyncio.wait_for(asyncio.gather(*first, *tasks), HANG)
    log.assert_no_chat_twice_in_flight()
    assert [size for _, size in log.started] == [1, N * TURN, 2 * N * TURN, 2 * N * TURN]
    assert log.started[2][0] == frozenset(ds[:N])
    assert log.started[3][0] == frozenset(ds[N:])
    assert log.beside[3] == frozenset(ds[:N])  # the two halves were in flight together
    for n, d in enumerate(ds):
        assert await _seqs(pg_store, d) == [f"{n}{half}-{j}" for half in "ab" for j in range(TURN)]


async def test_many_writers_sharing_chats_get_seqs_in_arrival_order(
    pg_store: SqlStore,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chats = [(await pg_store.create_chat("u", f"shared{n}")).chat_id for n in range(6)]
    log = Statements(pg_store, monkeypatch)

    async def writer(w: int) -> list[list[Message]]:
        chat_id = chats[w % len(chats)]
        returned = []
        for n in range(6):
            size = TURN if (w + n) % 2 else 1
            batch = [
                Message(role="user", agui_id=f"w{w}-{n}-{j}", content=f"{w} {n} {j}")
                for j in range(size)
            ]
            returned.append(await pg_store.append_messages(chat_id, batch))
        return returned

    results = await asyncio.wait_for(asyncio.gather(*(writer(w) for w in range(48))), HANG)
    log.assert_no_chat_twice_in_flight()
    # The first round: one lone call, then the other chats' calls beside it, one group.
    assert len(log.started[0][0]) == 1
    assert log.beside[1] == log.started[0][0]
    assert log.started[1][0] == frozenset(chats) - log.started[0][0]
    for chat_id in chats:
        stored = await _seqs(pg_store, chat_id)
        # Calls to one chat, in the order they reached the committer, got increasing seqs.
        firsts = [agui for arrived, agui in log.arrivals if arrived == chat_id]
        assert [agui for agui in stored if agui is not None and agui.endswith("-0")] == firsts
    for w, calls in enumerate(results):
        for n, messages in enumerate(calls):
            assert [m.agui_id for m in messages] == [f"w{w}-{n}-{j}" for j in range(len(messages))]
            seqs = [m.seq for m in messages]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
