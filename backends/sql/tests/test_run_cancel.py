"""A cancelled ``begin_run`` / ``end_run`` writes its batch whole or not at all (issue 12).

On SQLite ``commit_run`` runs without core's shielded task (``SqlStore.writes_run_whole``):
its transaction is one function on the connection's thread, awaited to its end. These
tests cancel the two batch writes after 0, 1, 2, ... event-loop iterations, on both
engines, and check after each that the run and its messages are all there or none of
them is, and that the store still writes (no ``BEGIN IMMEDIATE`` left held).
"""

from __future__ import annotations

from uuid import UUID

from threadkeep import Message, RunNotFound, RunStatus
from threadkeep_contract_tests._reliability import _cancel_after
from threadkeep_sql import SqlStore

TRIES = 24


async def _has_run(store: SqlStore, chat_id: UUID, run_id: str) -> bool:
    try:
        await store.get_run(chat_id, run_id)
    except RunNotFound:
        return False
    return True


async def test_writes_run_whole_names_commit_run_on_sqlite_only(store: SqlStore) -> None:
    whole = store.driver.writes_run_whole
    if store.driver.db.dialect == "sqlite":
        assert "commit_run" in whole
    else:
        assert "commit_run" not in whole  # PostgreSQL: core's shielded task stays


async def test_cancelled_begin_run_is_whole_or_absent(store: SqlStore) -> None:
    chat = await store.create_chat("u-cancel", "t-begin")
    finished = 0
    for attempt in range(TRIES):
        run_id = f"r{attempt}"
        user = Message(role="user", content=f"question {attempt}", agui_id=f"u{attempt}")
        begin = store.begin_run(chat.chat_id, run_id, owner="o", messages=[user])
        finished += await _cancel_after(begin, attempt % 12)
        stored = await store.get_message_by_agui_id(chat.chat_id, f"u{attempt}")
        assert await _has_run(store, chat.chat_id, run_id) == (stored is not None), attempt
    assert finished < TRIES, "no begin_run was ever cancelled mid-way"
    after = await store.append_message(chat.chat_id, {"role": "user", "content": "still here"})
    assert after.seq is not None


async def test_cancelled_end_run_is_whole_or_absent(store: SqlStore) -> None:
    chat = await store.create_chat("u-cancel", "t-end")
    finished = 0
    for attempt in range(TRIES):
        run_id = f"r{attempt}"
        run = await store.begin_run(chat.chat_id, run_id, owner="o")
        answer = Message(role="assistant", content=f"answer {attempt}", agui_id=f"a{attempt}")
        end = store.end_run(
            chat.chat_id,
            run_id,
            owner="o",
            status=RunStatus.COMPLETE,
            messages=[answer],
            current=run,
        )
        finished += await _cancel_after(end, attempt % 12)
        stored_run = await store.get_run(chat.chat_id, run_id)
        stored = await store.get_message_by_agui_id(chat.chat_id, f"a{attempt}")
        ended = stored_run.status is RunStatus.COMPLETE
        assert ended == (stored is not None), f"half-written end_run {attempt}"
        if not ended:  # the lease is still held: end it now, so the store is checked again
            await store.end_run(chat.chat_id, run_id, owner="o", status=RunStatus.INTERRUPTED)
    assert finished < TRIES, "no end_run was ever cancelled mid-way"
    after = await store.append_message(chat.chat_id, {"role": "user", "content": "still here"})
    assert after.seq is not None
