"""Observers run after the commit, never inside the transaction: a second connection opened
inside the hook already reads the new rows (SQLite would not show rows of an open write)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from uuid import UUID

from threadkeep import Message, RunStatus, hookimpl, register_observer, unregister_observer
from threadkeep_sql import SqlStore


class SecondConnection:
    """On each call, count the chat's rows through a fresh sqlite3 connection of its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: list[tuple[int, int]] = []  # (messages passed, rows readable)

    @hookimpl
    def threadkeep_messages_committed(self, chat_id: UUID, messages: Sequence[Message]) -> None:
        with closing(sqlite3.connect(self.path, timeout=0)) as conn:  # a held lock fails at once
            (rows,) = conn.execute(
                "SELECT count(*) FROM messages WHERE chat_id = ?", (chat_id.hex,)
            ).fetchone()
            conn.execute("BEGIN IMMEDIATE")  # the writer must not hold the write lock now
            conn.rollback()
        self.seen.append((len(messages), rows))


async def test_observers_see_committed_rows_from_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "observed.db"
    observer = SecondConnection(path)
    register_observer(observer)
    try:
        async with SqlStore(f"sqlite+aiosqlite:///{path}") as store:
            chat = await store.create_chat("u", "t")
            await store.append_messages(
                chat.chat_id, [Message(role="user", content=str(i)) for i in range(3)]
            )
            await store.begin_run(
                chat.chat_id, "r1", owner="w", messages=[Message(role="user", content="go")]
            )
            await store.end_run(
                chat.chat_id,
                "r1",
                owner="w",
                status=RunStatus.COMPLETE,
                messages=[Message(role="assistant", content="done", run_id="r1")],
            )
    finally:
        unregister_observer(observer)
    assert observer.seen == [(3, 3), (1, 4), (1, 5)]
