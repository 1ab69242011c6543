"""The shared contract suite (threadkeep-contract-tests) on SQLite and PostgreSQL.

The back door reads rows with the engines' own drivers (sqlite3, asyncpg), not through
``SqlStore``: a read-path bug cannot hide a write bug.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any
from uuid import UUID

import asyncpg
import pytest

from threadkeep import Store
from threadkeep_contract_tests import RawChat, RawMessage, StoreContract
from threadkeep_sql import SqlStore

from .conftest import PgTarget, copy_sqlite_template

CHATS_SQL = "SELECT body, deleted_at IS NOT NULL FROM chats"
MESSAGES_SQL = (
    "SELECT body, seq, deleted_at IS NOT NULL FROM messages WHERE chat_id = {} ORDER BY seq"
)


DAMAGED_BODIES = {
    "body_not_json": "not json {",
    "body_not_object": "[1, 2]",
    "body_wrong_types": '{"role": 5}',
}


MOVE_SQL = [
    f"UPDATE {table} SET seq = {{2}} WHERE chat_id = {{0}} AND seq = {{1}}"
    for table in ("messages", "message_refs")
]
"""Move a message's row (and its nested items' rows) to another seq, counter untouched."""


def damage_sql(kind: str, damage: str, placeholder: Callable[[int], str]) -> tuple[str, Any]:
    """Return ``(UPDATE statement, value)`` writing ``damage`` (``None`` statement: unsupported)."""
    table, where = {
        "chat": ("chats", "chat_id = {0}"),
        "message": ("messages", "chat_id = {0} AND seq = {1}"),
        "step": ("steps", "chat_id = {0} AND seq = {1}"),
        "run": ("runs", "chat_id = {0}"),
    }[kind]
    column, value = (
        ("created_at", "not-a-date")
        if damage == "timestamp"
        else (
            "body",
            DAMAGED_BODIES.get(damage),
        )
    )
    sql = f"UPDATE {table} SET {column} = {placeholder(3)} WHERE {where}"
    return sql.format(placeholder(1), placeholder(2)), value


class TestSqliteContract(StoreContract):
    """SQLite file, one per test: a copy of the session's migrated, empty template."""

    @pytest.fixture
    def store_factory(self, tmp_path: Path, sqlite_template: Path) -> Callable[..., Store]:
        self.path = tmp_path / "contract.db"
        url = copy_sqlite_template(sqlite_template, self.path)
        return lambda **options: SqlStore(url, **options)

    async def raw_chats(self, store: Store) -> list[RawChat]:
        with closing(sqlite3.connect(self.path)) as conn:
            rows = conn.execute(CHATS_SQL).fetchall()
        return [RawChat.from_body(body, deleted=bool(deleted)) for body, deleted in rows]

    async def raw_messages(self, store: Store, chat_id: UUID) -> list[RawMessage]:
        with closing(sqlite3.connect(self.path)) as conn:
            rows = conn.execute(MESSAGES_SQL.format("?"), (chat_id.hex,)).fetchall()
        return [
            RawMessage.from_body(body, chat_id=chat_id, seq=seq, hidden=bool(hidden))
            for body, seq, hidden in rows
        ]

    async def damage_row(
        self, store: Store, kind: str, chat_id: UUID, seq: int | None, damage: str
    ) -> str | None:
        sql, value = damage_sql(kind, damage, lambda n: f"?{n}")
        if value is None:  # SQLite holds text anywhere; native-type damage is MongoDB's
            return None
        with closing(sqlite3.connect(self.path)) as conn:
            conn.execute(sql, (chat_id.hex, seq, value))
            conn.commit()
        return "created_at" if damage == "timestamp" else "body"

    async def move_message(self, store: Store, chat_id: UUID, seq: int, new_seq: int) -> str:
        with closing(sqlite3.connect(self.path)) as conn:
            for sql in MOVE_SQL:
                conn.execute(sql.format("?1", "?2", "?3"), (chat_id.hex, seq, new_seq))
            conn.commit()
        return "behind"


class TestPostgresContract(StoreContract):
    """PostgreSQL, a fresh schema per test.

    The environment can make every store partitioned, read from a standby or connect through
    a transaction-mode PgBouncer (``conftest.pg_target``); the back door always reads the
    primary directly.
    """

    @pytest.fixture
    def store_factory(self, pg_target: PgTarget) -> Callable[..., Store]:
        self.dsn = pg_target.dsn  # conftest: a fresh schema or database, dropped after
        self.schema = pg_target.search_path
        return lambda **options: SqlStore(pg_target.url, **{**pg_target.options, **options})

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        conn = await asyncpg.connect(self.dsn, server_settings={"search_path": self.schema})
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def raw_chats(self, store: Store) -> list[RawChat]:
        rows = await self._fetch(CHATS_SQL)
        return [RawChat.from_body(body, deleted=deleted) for body, deleted in rows]

    async def raw_messages(self, store: Store, chat_id: UUID) -> list[RawMessage]:
        rows = await self._fetch(MESSAGES_SQL.format("$1"), chat_id)
        return [
            RawMessage.from_body(body, chat_id=chat_id, seq=seq, hidden=hidden)
            for body, seq, hidden in rows
        ]

    async def damage_row(
        self, store: Store, kind: str, chat_id: UUID, seq: int | None, damage: str
    ) -> str | None:
        if damage == "timestamp":  # timestamptz cannot hold 'not-a-date'
            return None
        sql, value = damage_sql(kind, damage, lambda n: f"${n}")
        if value is None:
            return None
        keyed_by_seq = kind in ("message", "step")
        if not keyed_by_seq:
            sql = sql.replace("$3", "$2")
        conn = await asyncpg.connect(self.dsn, server_settings={"search_path": self.schema})
        try:
            await conn.execute(sql, chat_id, *((seq,) if keyed_by_seq else ()), value)
        finally:
            await conn.close()
        return "body"

    async def move_message(self, store: Store, chat_id: UUID, seq: int, new_seq: int) -> str:
        conn = await asyncpg.connect(self.dsn, server_settings={"search_path": self.schema})
        try:
            for sql in MOVE_SQL:
                await conn.execute(sql.format("$1", "$2", "$3"), chat_id, seq, new_seq)
        finally:
            await conn.close()
        return "behind"
