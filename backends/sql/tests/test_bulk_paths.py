"""The bulk load's paths (``threadkeep_sql._load``): each stores what reading first stores.

On PostgreSQL a batch into a chat holding no message is written without reading which of
its ``agui_id``s are stored; one whose first ``agui_id`` is not stored is written first,
the unique index ``ux_messages_agui`` as the proof, and read only when the index refuses
it; one whose first id is stored reads first (one aggregate row, the stored rows
themselves only for a batch of stored and new messages). SQLite always reads first. Each
test runs on both engines and checks the outcome through the public API; on PostgreSQL it
also checks which path ran, so a path cannot silently stop being taken.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest

import threadkeep_sql._load as load_module
from threadkeep import Conflict, IdempotencyConflict, Message
from threadkeep_sql import SqlStore


def _history(count: int, *, start: int = 0, changed: int | None = None) -> Iterator[Message]:
    for n in range(start, count):
        text = f"message {n}" + (" (changed)" if n == changed else "")
        yield Message(role="user" if n % 2 else "assistant", agui_id=f"h-{n}", content=text)


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the PostgreSQL paths taken, in order (``read``, ``write-first``)."""
    taken: list[str] = []
    probe, expecting = load_module._probe, load_module._write_expecting_new

    async def read(*args: Any) -> Any:
        taken.append("read")
        return await probe(*args)

    async def write_first(*args: Any) -> Any:
        taken.append("write-first")
        return await expecting(*args)

    monkeypatch.setattr(load_module, "_probe", read)
    monkeypatch.setattr(load_module, "_write_expecting_new", write_first)
    return taken


def _on_postgres(store: SqlStore) -> bool:
    return store.driver.db.dialect == "postgresql"


async def _contents(store: SqlStore, chat_id: UUID) -> list[tuple[str | None, str]]:
    items: list[tuple[str | None, str]] = []
    cursor = None
    while True:
        page = await store.list_messages(chat_id, limit=200, cursor=cursor)
        items += [(m.agui_id, m.content) for m in page.items]
        if not page.has_more:
            return items
        cursor = page.next_cursor


@pytest.mark.asyncio
async def test_a_first_load_reads_nothing_and_its_rerun_reads_each_batch(
    store: SqlStore, paths: list[str]
) -> None:
    chat = await store.create_chat("u", "first")
    report = await store.load_messages(chat.chat_id, _history(12), batch_size=5)
    assert (report.created, report.present, report.batches) == (12, 0, 3)
    if _on_postgres(store):  # batch 1 into an empty chat; 2 and 3 start with a new id
        assert paths == ["write-first", "write-first"]
    paths.clear()
    again = await store.load_messages(chat.chat_id, _history(12), batch_size=5)
    assert (again.created, again.present) == (0, 12)
    if _on_postgres(store):
        assert paths == ["read", "read", "read"]
    assert await _contents(store, chat.chat_id) == [(f"h-{n}", f"message {n}") for n in range(12)]


@pytest.mark.asyncio
async def test_a_stored_id_past_the_first_is_found_when_the_index_refuses_the_batch(
    store: SqlStore, paths: list[str]
) -> None:
    chat = await store.create_chat("u", "refused")
    stored = await store.append_message(chat.chat_id, list(_history(6))[5])
    report = await store.load_messages(chat.chat_id, _history(10), batch_size=10)
    assert (report.created, report.present) == (9, 1)
    if _on_postgres(store):  # written first, refused by the index, then read
        assert paths == ["write-first", "read"]
    contents = await _contents(store, chat.chat_id)
    expected = [(f"h-{n}", f"message {n}") for n in (5, 0, 1, 2, 3, 4, 6, 7, 8, 9)]
    assert contents == expected
    again = await store.get_message_by_agui_id(chat.chat_id, "h-5")
    assert again is not None
    assert (again.message_id, again.seq) == (stored.message_id, stored.seq)


@pytest.mark.asyncio
async def test_a_changed_payload_past_the_first_refuses_the_batch_whole(
    store: SqlStore, paths: list[str]
) -> None:
    chat = await store.create_chat("u", "changed")
    await store.append_message(chat.chat_id, list(_history(6))[5])
    revision = (await store.get_chat(chat.chat_id)).revision
    with pytest.raises(IdempotencyConflict):
        await store.load_messages(chat.chat_id, _history(10, changed=5), batch_size=10)
    if _on_postgres(store):
        assert paths == ["write-first", "read"]
    assert await _contents(store, chat.chat_id) == [("h-5", "message 5")]
    assert (await store.get_chat(chat.chat_id)).revision == revision


@pytest.mark.asyncio
async def test_a_taken_message_id_is_still_a_conflict_on_every_path(store: SqlStore) -> None:
    chat = await store.create_chat("u", "taken")
    first = await store.append_message(chat.chat_id, Message(role="user", content="first"))
    batch = list(_history(4))
    batch[2] = batch[2].model_copy(update={"message_id": first.message_id})
    with pytest.raises(Conflict):
        await store.load_messages(chat.chat_id, batch)
    assert await _contents(store, chat.chat_id) == [(None, "first")]
    empty = await store.create_chat("u", "taken-empty")
    with pytest.raises(Conflict):  # the chat holds no message: written without a read
        await store.load_messages(empty.chat_id, batch)
    assert await _contents(store, empty.chat_id) == []


@pytest.mark.asyncio
async def test_a_batch_of_stored_and_new_messages_reads_the_stored_rows(
    store: SqlStore, paths: list[str]
) -> None:
    chat = await store.create_chat("u", "mixed")
    await store.load_messages(chat.chat_id, _history(5))
    paths.clear()
    unnamed = Message(role="user", content="no id")
    batch: list[Message] = [*_history(8), unnamed]
    report = await store.load_messages(chat.chat_id, batch, batch_size=20)
    assert (report.created, report.present) == (4, 5)
    if _on_postgres(store):
        assert paths == ["read"]
    expected = [(f"h-{n}", f"message {n}") for n in range(8)] + [(None, "no id")]
    assert await _contents(store, chat.chat_id) == expected
    # Every id stored alike (the aggregate settles it): only the message without one is new.
    another = Message(role="user", content="no id")
    again = await store.load_messages(chat.chat_id, [*_history(3), another])
    assert (again.created, again.present) == (1, 3)
    assert await _contents(store, chat.chat_id) == [*expected, (None, "no id")]


@pytest.mark.asyncio
async def test_a_load_cut_half_way_completes_on_a_rerun_without_duplicates(
    store: SqlStore,
) -> None:
    chat = await store.create_chat("u", "resumed")

    def cut(count: int, at: int) -> Iterator[Message]:
        for n, message in enumerate(_history(count)):
            if n == at:
                raise RuntimeError("the source went away")
            yield message

    with pytest.raises(RuntimeError):
        await store.load_messages(chat.chat_id, cut(23, 12), batch_size=5)
    assert len(await _contents(store, chat.chat_id)) == 10  # whole batches only
    report = await store.load_messages(chat.chat_id, _history(23), batch_size=7)
    assert (report.created, report.present) == (13, 10)  # the batch of 7-13 is mixed
    assert await _contents(store, chat.chat_id) == [(f"h-{n}", f"message {n}") for n in range(23)]
    again = await store.load_messages(chat.chat_id, _history(23), batch_size=7)
    assert (again.created, again.present) == (0, 23)
