"""Group commit on PostgreSQL: concurrent appends share statements, outcomes stay per caller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
import sqlalchemy as sa

from threadkeep import (
    BackendUnavailable,
    ChatNotFound,
    Conflict,
    IdempotencyConflict,
    InvalidContent,
    Message,
    Reasoning,
    ToolCall,
)
from threadkeep_sql import SqlStore
from threadkeep_sql._group import GroupCommitter
from threadkeep_sql._group_sql import JSON_MAX_MESSAGES

from .test_pooler import pooled_url  # noqa: F401 - the fixture: a database behind PgBouncer
from .test_replica import standby_url


@pytest.fixture
async def pg_store(pg_schema: tuple[str, str]) -> AsyncIterator[SqlStore]:
    url, schema = pg_schema
    store = SqlStore(url, schema=schema)
    await store.open()
    yield store
    await store.close()


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the number of calls of every group statement written (and let it run)."""
    sizes: list[int] = []
    real = GroupCommitter._write_group

    async def counting(self: GroupCommitter, group: list[Any]) -> dict[int, int]:
        sizes.append(len(group))
        return await real(self, group)

    monkeypatch.setattr(GroupCommitter, "_write_group", counting)
    return sizes


def _committer(store: SqlStore) -> GroupCommitter:
    committer = store.driver._group
    assert committer is not None
    return committer


CHATS = 12
APPENDS = 200
LEADS = 1
"""Appends an idle committer sends at once, each alone, before the next ones queue."""


async def _stored_by_seq(store: SqlStore, chat_id: UUID) -> dict[int, Message]:
    page = await store.list_messages(chat_id, limit=APPENDS)
    return {m.seq: m for m in page.items}


def _user(n: int | str, **fields: Any) -> Message:
    return Message(role="user", agui_id=f"a{n}", content=str(n), **fields)


async def test_concurrent_appends_are_coalesced(pg_store: SqlStore, groups: list[int]) -> None:
    chats = [await pg_store.create_chat("u", f"t{n}") for n in range(CHATS)]
    # Runs of a few appends to one chat, then another chat: a group holds many appends of
    # each chat, interleaved with the others'.
    where = [chats[(n // 3) % CHATS].chat_id for n in range(APPENDS)]
    returned = await asyncio.gather(
        *(pg_store.append_message(where[n], _user(n)) for n in range(APPENDS))
    )
    # Every append became ready in the same loop iteration: the first goes at once, alone;
    # the rest arrive while it is in flight. Those of other chats (a large group) go beside
    # it; those of its chat wait for it, then go as a group of their own.
    lead_chat = where[0]
    later = sum(1 for chat_id in where[1:] if chat_id == lead_chat)
    assert groups == [APPENDS - LEADS - later, later]
    assert [(m.chat_id, m.content, m.agui_id) for m in returned] == [
        (where[n], str(n), f"a{n}") for n in range(APPENDS)
    ]
    for chat in chats:
        stored = await _stored_by_seq(pg_store, chat.chat_id)
        mine = [m for m in returned if m.chat_id == chat.chat_id]
        # Every caller got exactly the row the store holds at its seq, seqs have no gaps,
        # and a chat's seqs follow the order its appends arrived in.
        assert sorted(stored) == list(range(1, len(mine) + 1))
        assert [m.seq for m in mine] == sorted(m.seq for m in mine)
        for message in mine:
            assert stored[message.seq] == message
        refreshed = await pg_store.get_chat(chat.chat_id)
        assert refreshed.last_message_at == max(m.updated_at for m in mine)


async def test_turns_with_tool_calls_are_coalesced_whole(
    pg_store: SqlStore, groups: list[int]
) -> None:
    chats = [await pg_store.create_chat("u", f"turns{n}") for n in range(4)]

    def turn(n: int) -> list[Message]:
        call = ToolCall(name="lookup", arguments=f'{{"n": {n}}}', agui_id=f"call-{n}")
        thought = Reasoning(content=f"thinking {n}", agui_id=f"why-{n}")
        return [
            Message(role="user", agui_id=f"q{n}", content=f"question {n}"),
            Message(role="assistant", agui_id=f"t{n}", tool_calls=[call], reasonings=[thought]),
            Message(role="tool", agui_id=f"r{n}", content=f"answer {n}", tool_call_ref=f"call-{n}"),
        ]

    turns = [turn(n) for n in range(40)]
    returned = await asyncio.gather(
        *(pg_store.append_messages(chats[n % 4].chat_id, turns[n]) for n in range(40))
    )
    assert sum(groups) == 40 - LEADS  # the first turn went alone
    assert max(groups) > 1
    for n, messages in enumerate(returned):
        assert [m.agui_id for m in messages] == [f"q{n}", f"t{n}", f"r{n}"]
        seqs = [m.seq for m in messages]
        assert seqs == list(range(seqs[0], seqs[0] + 3))  # one call: consecutive seqs
        (call,) = messages[1].tool_calls
        found = await pg_store.get_tool_call_by_agui_id(chats[n % 4].chat_id, f"call-{n}")
        assert found is not None
        assert found.tool_call_id == call.tool_call_id
        assert (await pg_store.get_tool_call(call.tool_call_id)).name == "lookup"
        (thought,) = messages[1].reasonings
        assert (await pg_store.get_reasoning(thought.reasoning_id)).content == f"thinking {n}"
    for chat in chats:
        stored = await _stored_by_seq(pg_store, chat.chat_id)
        assert sorted(stored) == list(range(1, 31))
    # A retry of a whole turn writes nothing and returns what is stored.
    again = await asyncio.gather(
        *(pg_store.append_messages(chats[n % 4].chat_id, turns[n]) for n in range(8))
    )
    assert again == returned[:8]


class _Gate:
    """Holds every statement of a store's committer (groups and lone calls) until opened."""

    def __init__(self, store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.committer = _committer(store)
        self.open = asyncio.Event()
        self.held = 0
        real_lone = self.committer._lone
        real_group = GroupCommitter._write_group

        async def lone(*args: Any) -> int | None:
            await self._hold()
            return await real_lone(*args)

        async def group(committer: GroupCommitter, calls: list[Any]) -> dict[int, int]:
            await self._hold()
            return await real_group(committer, calls)

        self.committer._lone = lone
        monkeypatch.setattr(GroupCommitter, "_write_group", group)

    async def _hold(self) -> None:
        self.held += 1
        await self.open.wait()

    async def until_queued(self, count: int) -> None:
        for _ in range(3000):  # up to 30 s on a loaded machine
            if self.held >= LEADS and len(self.committer._queue) >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{count} appends never queued")


async def _fill_inflight(store: SqlStore, chat_id: UUID) -> list[asyncio.Task[Message]]:
    """Start the LEADS lone appends an idle committer sends at once (each its own statement)."""
    tasks = []
    for n in range(LEADS):
        tasks.append(asyncio.ensure_future(store.append_message(chat_id, _user(f"lead{n}"))))
        for _ in range(5):
            await asyncio.sleep(0)
    return tasks


async def test_a_store_caller_cancelled_while_queued_touches_no_other_caller(
    pg_store: SqlStore, groups: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = await pg_store.create_chat("u", "cancel")
    gate = _Gate(pg_store, monkeypatch)
    leads = await _fill_inflight(pg_store, chat.chat_id)
    tasks = [
        asyncio.ensure_future(pg_store.append_message(chat.chat_id, _user(n))) for n in range(6)
    ]
    await gate.until_queued(6)
    tasks[2].cancel()
    await asyncio.sleep(0.05)
    gate.open.set()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(m, Message) for m in await asyncio.gather(*leads))
    # Writes run to completion under cancellation (issue 12): the victim's append is
    # written with its group, then the victim sees its cancellation, and only it.
    assert isinstance(outcomes[2], asyncio.CancelledError)
    assert groups == [6]
    stored = await _stored_by_seq(pg_store, chat.chat_id)
    assert sorted(stored) == list(range(1, LEADS + 7))
    assert sorted(m.agui_id or "" for m in stored.values()) == sorted(
        [f"alead{n}" for n in range(LEADS)] + [f"a{n}" for n in range(6)]
    )
    for n, message in enumerate(outcomes):
        if n != 2:
            assert isinstance(message, Message), (n, message)
            assert stored[message.seq] == message


async def test_a_direct_caller_cancelled_while_queued_writes_nothing(
    pg_store: SqlStore, groups: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = await pg_store.create_chat("u", "direct")
    committer = _committer(pg_store)
    gate = _Gate(pg_store, monkeypatch)
    leads = await _fill_inflight(pg_store, chat.chat_id)
    now = datetime.now(UTC)
    prepared = [
        pg_store.prepare(pg_store._messages._coerce_message(_user(n), chat.chat_id))
        for n in range(3)
    ]
    calls = [asyncio.ensure_future(committer.append(chat.chat_id, [p], now)) for p in prepared]
    await gate.until_queued(3)
    calls[1].cancel()
    await asyncio.sleep(0.05)
    assert len(committer._queue) == 2  # taken out: never sent
    gate.open.set()
    await asyncio.gather(*leads)
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(outcomes[1], asyncio.CancelledError)
    assert groups == [2]
    stored = await _stored_by_seq(pg_store, chat.chat_id)
    leads = {f"alead{n}" for n in range(LEADS)}
    assert {m.agui_id for m in stored.values()} == leads | {"a0", "a2"}


async def test_close_writes_the_queued_appends_first(
    pg_store: SqlStore, groups: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = await pg_store.create_chat("u", "closing")
    gate = _Gate(pg_store, monkeypatch)
    leads = await _fill_inflight(pg_store, chat.chat_id)
    tasks = [
        asyncio.ensure_future(pg_store.append_message(chat.chat_id, _user(n))) for n in range(10)
    ]
    await gate.until_queued(10)
    closing = asyncio.ensure_future(pg_store.close())
    await asyncio.sleep(0.05)
    assert not closing.done()  # it waits for the appends in flight and queued
    gate.open.set()
    returned = await asyncio.gather(*leads, *tasks)
    await closing
    assert groups == [10]
    await pg_store.open()
    stored = await _stored_by_seq(pg_store, chat.chat_id)
    assert sorted(stored) == list(range(1, LEADS + 11))
    for message in returned:
        assert stored[message.seq] == message


async def test_a_failing_group_retries_each_append_alone(
    pg_store: SqlStore, groups: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = await pg_store.create_chat("u", "mixed")
    gone = await pg_store.create_chat("u", "gone")
    await pg_store.delete_chat(gone.chat_id)
    taken = await pg_store.append_message(chat.chat_id, Message(role="user", content="first"))
    await pg_store.append_message(chat.chat_id, Message(role="user", agui_id="d", content="v1"))
    groups.clear()
    gate = _Gate(pg_store, monkeypatch)
    leads = await _fill_inflight(pg_store, chat.chat_id)
    special = {
        1: (chat.chat_id, Message(role="user", content="x", message_id=taken.message_id)),
        2: (gone.chat_id, Message(role="user", content="to a deleted chat")),
        3: (chat.chat_id, Message(role="user", agui_id="d", content="v2")),
        6: (chat.chat_id, Message(role="user", agui_id="d", content="v1")),
        7: (chat.chat_id, Message(role="user", content="\ud800")),  # refused before queueing
    }

    async def one(n: int) -> Message:
        chat_id, message = special.get(n, (chat.chat_id, _user(f"ok{n}")))
        return await pg_store.append_message(chat_id, message)

    tasks = [asyncio.ensure_future(one(n)) for n in range(9)]
    await gate.until_queued(8)
    gate.open.set()
    await asyncio.gather(*leads)
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    # 6 repeats 3's agui_id, so it waits for the next group, and 8 (same chat, after it)
    # waits with it: no call overtakes an earlier one of its chat. The taken message_id
    # fails the first group statement as a whole; every call of it is then written alone,
    # so only its caller sees the Conflict.
    assert groups == [6, 2]
    assert isinstance(outcomes[1], Conflict)
    assert isinstance(outcomes[2], ChatNotFound)
    assert isinstance(outcomes[3], IdempotencyConflict)
    assert isinstance(outcomes[7], InvalidContent)
    retry = outcomes[6]
    assert isinstance(retry, Message)
    assert retry.content == "v1"
    ok = [0, 4, 5, 8]
    for n in ok:
        outcome = outcomes[n]
        assert isinstance(outcome, Message), (n, outcome)
        assert outcome.content == f"ok{n}"
    # The failed group's appends to one chat are retried one after another, in arrival order.
    seqs = [m.seq for n in ok if isinstance(m := outcomes[n], Message)]
    assert seqs == sorted(seqs)
    page = await pg_store.list_messages(chat.chat_id, limit=200)
    assert len(page.items) == 2 + LEADS + len(ok)
    assert len({m.message_id for m in page.items}) == len(page.items)


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
    # One "r" per statement, and never two in flight at once: the four repeats are retries
    # that each found the first stored.
    assert sum(groups) <= 2


async def test_a_lost_connection_fails_each_call_of_its_group_and_retries_none(
    pg_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = await pg_store.create_chat("u", "lost")
    committer = _committer(pg_store)
    gate = _Gate(pg_store, monkeypatch)  # the leads' lone statements wait for it
    retried: list[Any] = []
    real_lone = committer._lone

    async def lone(*args: Any) -> int | None:
        retried.append(args)
        return await real_lone(*args)

    async def lost(self: GroupCommitter, group: list[Any]) -> dict[int, int]:
        raise BackendUnavailable("the database failed (ConnectionResetError: reset by peer)")

    committer._lone = lone
    monkeypatch.setattr(GroupCommitter, "_write_group", lost)
    leads = await _fill_inflight(pg_store, chat.chat_id)
    tasks = [
        asyncio.ensure_future(
            pg_store.append_message(chat.chat_id, Message(role="user", content=str(n)))
        )
        for n in range(6)
    ]
    await gate.until_queued(6)
    gate.open.set()
    assert all(isinstance(m, Message) for m in await asyncio.gather(*leads))
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    # The group may have committed before the connection went: a retry could write the
    # agui-less messages twice, so each caller gets its own BackendUnavailable instead.
    assert all(isinstance(o, BackendUnavailable) for o in outcomes)
    assert len({id(o) for o in outcomes}) == 6
    assert len(retried) == LEADS  # the leads' own statements, no retry


async def test_a_cancelled_group_leaves_no_caller_waiting(
    pg_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = await pg_store.create_chat("u", "stuck")
    gate = _Gate(pg_store, monkeypatch)
    stuck = asyncio.Event()

    async def hangs(self: GroupCommitter, group: list[Any]) -> dict[int, int]:
        stuck.set()
        await asyncio.Event().wait()  # a statement that never comes back
        raise AssertionError("unreachable")

    monkeypatch.setattr(GroupCommitter, "_write_group", hangs)
    leads = await _fill_inflight(pg_store, chat.chat_id)
    tasks = [
        asyncio.ensure_future(pg_store.append_message(chat.chat_id, _user(n))) for n in range(6)
    ]
    await gate.until_queued(6)
    gate.open.set()
    assert all(isinstance(m, Message) for m in await asyncio.gather(*leads))
    await asyncio.wait_for(stuck.wait(), timeout=30)
    committer = _committer(pg_store)
    while committer._drainers:
        for drainer in list(committer._drainers):
            drainer.cancel()
        await asyncio.sleep(0.01)
    outcomes = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
    # Each append of a cancelled group gets its own BackendUnavailable (it may or may not
    # be written) instead of waiting forever.
    assert all(isinstance(o, BackendUnavailable) for o in outcomes)
    await committer.close()
    assert not committer._queue
    assert committer._inflight == 0


async def test_groups_through_a_transaction_pooler(
    pooled_url: str,  # noqa: F811 - the fixture imported above
    groups: list[int],
) -> None:
    async with SqlStore(pooled_url, pooler="transaction") as store:
        chats = [await store.create_chat("u", f"pooled{n}") for n in range(8)]
        returned = await asyncio.gather(
            *(store.append_message(chats[n % 8].chat_id, _user(n)) for n in range(64)),
            *(
                store.append_messages(chats[n % 8].chat_id, [_user(f"{n}-{j}") for j in range(5)])
                for n in range(16)
            ),
        )
        assert groups
        assert max(groups) > 1
        for chat in chats:
            page = await store.list_messages(chat.chat_id, limit=200)
            assert [m.seq for m in page.items] == list(range(1, 8 + 2 * 5 + 1))
            mine = {m.message_id for m in page.items}
            assert mine == {
                m.message_id
                for result in returned
                for m in (result if isinstance(result, list) else [result])
                if m.chat_id == chat.chat_id
            }


async def test_grouped_writes_are_read_back_through_a_standby(
    pg_schema: tuple[str, str], groups: list[int]
) -> None:
    url, schema = pg_schema
    options = {"schema": schema, "read_url": standby_url(), "read_consistency": "session"}
    async with SqlStore(url, **options) as store:
        chats = [await store.create_chat("u", f"replica{n}") for n in range(6)]
        for round_ in range(5):
            returned = await asyncio.gather(
                *(store.append_message(c.chat_id, _user(f"{round_}-{c.thread_id}")) for c in chats)
            )
            # Each caller reads its own grouped write at once (the group was noted as a
            # write of this store, so the read waits for the standby or goes to the primary).
            for chat, message in zip(chats, returned, strict=True):
                page = await store.list_messages(chat.chat_id, limit=1)
                assert [m.message_id for m in page.items] == [message.message_id]
        assert max(groups) > 1


async def test_a_store_caller_cancelled_in_flight_is_written_whole_without_a_shield_task(
    pg_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On PostgreSQL the driver runs insert_messages whole itself, so core adds no task.
    assert "insert_messages" in pg_store.driver.writes_run_whole
    assert not hasattr(pg_store.primitives.insert_messages, "__wrapped__")
    chat = await pg_store.create_chat("u", "in-flight")
    gate = _Gate(pg_store, monkeypatch)
    task = asyncio.ensure_future(pg_store.append_message(chat.chat_id, _user("x")))
    for _ in range(3000):
        if gate.held:
            break
        await asyncio.sleep(0.01)
    assert gate.held == 1  # sent at once, alone, and held on the way to the server
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # the caller waits for its statement's outcome
    gate.open.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    stored = await _stored_by_seq(pg_store, chat.chat_id)
    assert [m.agui_id for m in stored.values()] == ["ax"]
    again = await pg_store.append_message(chat.chat_id, _user("x"))  # a retry: stored whole
    assert again == stored[1]


@pytest.mark.parametrize("padding", [0, JSON_MAX_MESSAGES], ids=["json rows", "array rows"])
async def test_a_group_keeps_given_and_missing_columns_apart(
    pg_store: SqlStore, groups: list[int], padding: int
) -> None:
    # Columns no message of a group has go as NULL (a JSON null, or one NULL array that
    # unnest pads); a group with some given keeps each message's own value, and created_at
    # defaults to the write time. A small group's rows go as JSON, a large one's as arrays.
    chat = await pg_store.create_chat("u", "columns")
    given = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    shapes: list[dict[str, Any]] = [
        {},
        {"run_id": "r1", "created_at": given},
        {"block_id": "b\\%_1", "request_id": "q1"},
        {},
        {},
    ] + [{}] * padding
    returned = await asyncio.gather(
        *(pg_store.append_message(chat.chat_id, _user(f"c{n}", **f)) for n, f in enumerate(shapes))
    )
    assert sum(groups) == len(shapes) - LEADS
    stored = await _stored_by_seq(pg_store, chat.chat_id)
    for message, shape in zip(returned, shapes, strict=True):
        row = stored[message.seq]
        assert row == message
        for field in ("run_id", "request_id", "block_id"):
            assert getattr(row, field) == shape.get(field)
        assert row.created_at == shape.get("created_at", row.updated_at)
    page = await pg_store.list_messages(chat.chat_id, message_filter={"block_id": "b\\%_1"})
    assert [m.agui_id for m in page.items] == ["ac2"]
    # Only the group's own rows are written with these columns.
    assert {m.run_id for m in stored.values()} == {None, "r1"}


async def test_a_group_skips_the_calls_of_chats_not_hot_and_of_stored_agui_ids(
    pg_store: SqlStore, groups: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One group statement (it does not fail) holding calls to a live chat, a deleted chat,
    # a chat that is not active, and a call whose agui_id its chat stores: only the live
    # chat's new calls are written; each of the others comes back as None (nothing of it
    # written), as from a lone append. The chats are locked whatever their state.
    live = await pg_store.create_chat("u", "live")
    gone = await pg_store.create_chat("u", "gone")
    await pg_store.delete_chat(gone.chat_id)
    asleep = await pg_store.create_chat("u", "asleep")
    async with pg_store.driver._db.transaction() as conn:
        await conn.execute(
            sa.text("UPDATE chats SET status = 'archived' WHERE chat_id = :c"),
            {"c": asleep.chat_id},
        )
    stored = await pg_store.append_message(live.chat_id, _user("kept"))
    committer = _committer(pg_store)
    gate = _Gate(pg_store, monkeypatch)
    lead = asyncio.ensure_future(
        committer.append(live.chat_id, [_prepared(pg_store, live, "l")], _now())
    )
    for _ in range(5):
        await asyncio.sleep(0)
    where = [live, gone, live, asleep, live, live]
    names = ["n0", "n1", "kept", "n3", "n4", "n5"]
    calls = [
        asyncio.ensure_future(committer.append(c.chat_id, [_prepared(pg_store, c, n)], _now()))
        for c, n in zip(where, names, strict=True)
    ]
    await gate.until_queued(len(calls))
    gate.open.set()
    await lead
    firsts = await asyncio.gather(*calls)
    assert groups == [len(calls)]
    assert [first is None for first in firsts] == [False, True, True, True, False, False]
    page = await pg_store.list_messages(live.chat_id, limit=20)
    assert [m.agui_id for m in page.items] == ["akept", "al", "an0", "an4", "an5"]
    assert [m.seq for m in page.items] == [stored.seq, 2, 3, 4, 5]
    assert [firsts[n] for n in (0, 4, 5)] == [3, 4, 5]
    for chat in (gone, asleep):
        async with pg_store.driver._db.transaction() as conn:
            count = await conn.execute(
                sa.text("SELECT count(*) FROM messages WHERE chat_id = :c"), {"c": chat.chat_id}
            )
            assert count.scalar() == 0


def _now() -> datetime:
    return datetime.now(UTC)


def _prepared(store: SqlStore, chat: Any, name: str) -> Any:
    return store.prepare(store._messages._coerce_message(_user(name), chat.chat_id))
