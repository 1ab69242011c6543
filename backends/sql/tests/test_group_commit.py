"""Group commit on PostgreSQL: concurrent appends share statements, outcomes stay per caller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from threadkeep import ChatNotFound, Conflict, IdempotencyConflict, Message
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


async def test_concurrent_appends_are_coalesced(pg_store: SqlStore, groups: list[int]) -> None:
    chats = [await pg_store.create_chat("u", f"t{n}") for n in range(5)]
    appends = [
        pg_store.append_message(
            chats[n % 5].chat_id, Message(role="user", agui_id=f"a{n}", content=str(n))
        )
        for n in range(40)
    ]
    stored = await asyncio.gather(*appends)
    # The first MAX_INFLIGHT appends run alone; the rest, queued behind them, go in one
    # statement.
    assert groups == [40 - MAX_INFLIGHT]
    assert [m.content for m in stored] == [str(n) for n in range(40)]
    for chat in chats:
        page = await pg_store.list_messages(chat.chat_id, limit=200)
        mine = [m for m in stored if m.chat_id == chat.chat_id]
        assert [(m.message_id, m.seq) for m in page.items] == [(m.message_id, m.seq) for m in mine]
        assert [m.seq for m in page.items] == list(range(1, 9))
        assert (await pg_store.get_chat(chat.chat_id)).last_message_at == mine[-1].updated_at


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
