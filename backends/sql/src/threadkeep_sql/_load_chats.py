"""``load_chats`` and ``find_live_chats``: many new chats in one transaction, found in one read.

The bulk path of importers (``Store.load_chats``): a batch of new chats, each with its
messages, runs and steps, is written in one transaction with one multi-row statement per
table, whatever the number of chats:

1. read which of the batch's chat keys (``dedup_key``) a live chat holds, and which of its
   step ids are stored (SQLite: inside ``BEGIN IMMEDIATE``, which holds the file; PostgreSQL:
   a racing creator of the same key makes the insert fail with a unique violation, and the
   batch is tried again, the read then seeing it);
2. insert the other chats with their counters final (``next_seq``, ``next_step_seq``,
   ``revision`` and ``last_message_at`` as ``insert_chat`` + ``insert_messages`` leave
   them), then their messages and ``message_refs`` rows, runs and steps.

SQLite runs it all as one function on the connection's thread (one hop, ``executemany``);
PostgreSQL through one SQLAlchemy transaction, whose ``executemany`` sends multi-row
``INSERT``s (``insertmanyvalues``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

import sqlalchemy as sa

from threadkeep import Chat, Conflict, Step, chat_deduplication_key
from threadkeep.driver import LoadedChat

from ._archive import step_values
from ._base import SqlBase, message_values, ref_values
from ._chats import _chat_columns
from ._errors import is_unique_violation
from ._lite import LiteOps, run_on_thread
from ._runs import run_values
from ._schema import CHAT_COLUMNS, chats, message_refs, messages, runs, steps

__all__ = ["LoadChatsMixin"]

_ATTEMPTS = 3
_c = chats.c
_KEYS = sa.func.json_each(sa.bindparam("keys", type_=sa.String)).table_valued("value")
_TAKEN = sa.select(_c.dedup_key).where(
    _c.dedup_key.in_(sa.select(_KEYS.c.value)), _c.deleted_at.is_(None)
)
_STEP_IDS = sa.func.json_each(sa.bindparam("ids", type_=sa.String)).table_valued("value")
_STORED_STEPS = sa.select(steps.c.step_id).where(
    steps.c.step_id.in_(sa.select(_STEP_IDS.c.value))  # SQLite keeps a UUID as 32 hex digits
)
_FIND_MANY = sa.select(*CHAT_COLUMNS).where(
    _c.dedup_key.in_(sa.bindparam("keys", expanding=True)), _c.deleted_at.is_(None)
)
_INSERT_CHAT = sa.insert(chats).values(
    {c.name: sa.bindparam(f"v_{c.name}", type_=c.type) for c in chats.c if c.name != "seq"}
)
"""A chat row, its ``seq`` left to the table (a bare insert of every column would bind it)."""
_INSERTS = (
    _INSERT_CHAT,
    sa.insert(messages),
    sa.insert(message_refs),
    sa.insert(runs),
    sa.insert(steps),
)


class LoadChatsMixin(SqlBase):
    """``load_chats`` and ``find_live_chats`` (``threadkeep.driver``), see the module docstring."""

    async def find_live_chats(
        self, user_id: str, thread_ids: Sequence[str], tenant_id: str | None
    ) -> dict[str, Chat]:
        if not thread_ids:
            return {}
        keys = [chat_deduplication_key(user_id, t, tenant_id) for t in thread_ids]
        async with self._db.read() as conn:
            rows = (await conn.execute(_FIND_MANY, {"keys": keys})).all()
        found = self._chat_rows(rows)
        return {chat.thread_id: chat for chat in found if chat.user_id == user_id}

    async def load_chats(self, chats_: Sequence[LoadedChat], now: datetime) -> list[bool]:
        if self._db.dialect == "sqlite":
            work = partial(self._load_chats_on_thread, chats_=chats_, now=now)
            return await run_on_thread(self._db, work, write=True)
        for attempt in range(_ATTEMPTS):
            try:
                return await self._load_chats_postgres(chats_, now)
            except Exception as exc:
                if attempt == _ATTEMPTS - 1 or not is_unique_violation(exc):
                    raise  # a racing creator of a key: the read sees it next time
        raise AssertionError("unreachable")  # pragma: no cover

    async def _load_chats_postgres(self, chats_: Sequence[LoadedChat], now: datetime) -> list[bool]:
        keys = [item.chat.dedup_key for item in chats_]
        ids = [s.step_id for item in chats_ for s in item.steps]
        async with self._db.transaction() as conn:
            taken = {
                row[0]
                for row in await conn.execute(
                    sa.select(_c.dedup_key).where(_c.dedup_key.in_(keys), _c.deleted_at.is_(None))
                )
            }
            if ids:
                stored = (
                    await conn.execute(sa.select(steps.c.step_id).where(steps.c.step_id.in_(ids)))
                ).all()
                _refuse_stored_steps([row[0] for row in stored])
            written, tables = self._rows(chats_, taken, now)
            for stmt, rows in zip(_INSERTS, tables, strict=True):
                if rows:
                    await conn.execute(stmt, rows)
        return written

    def _load_chats_on_thread(
        self, ops: LiteOps, chats_: Sequence[LoadedChat], now: datetime
    ) -> list[bool]:
        """The SQLite batch inside ``BEGIN IMMEDIATE``, on the connection's thread (one hop)."""
        keys = json.dumps([item.chat.dedup_key for item in chats_])
        taken = {row[0] for row in ops.all(_TAKEN, {"keys": keys})}
        ids = [s.step_id.hex for item in chats_ for s in item.steps]
        if ids:
            _refuse_stored_steps(
                [row[0] for row in ops.all(_STORED_STEPS, {"ids": json.dumps(ids)})]
            )
        written, tables = self._rows(chats_, taken, now)
        for stmt, rows in zip(_INSERTS, tables, strict=True):
            if rows:
                ops.execute_many(stmt, rows)
        return written

    def _rows(
        self, chats_: Sequence[LoadedChat], taken: set[str], now: datetime
    ) -> tuple[list[bool], tuple[list[dict[str, Any]], ...]]:
        """Which chats are written, and the rows of each table (``_INSERTS`` order)."""
        written: list[bool] = []
        tables: tuple[list[dict[str, Any]], ...] = ([], [], [], [], [])
        chat_rows, message_rows, ref_rows, run_rows, step_rows = tables
        for item in chats_:
            chat = item.chat
            if chat.dedup_key in taken:
                written.append(False)
                continue
            taken.add(chat.dedup_key)
            written.append(True)
            chat_rows.append(self._chat_values(item, now))
            for seq, prepared in enumerate(item.messages, start=1):
                message_rows.append(message_values(prepared, chat.chat_id, seq, now))
                ref_rows += ref_values(prepared.message, chat.chat_id, seq)
            for run in item.runs:
                values = run_values(run, self.record_body(run))
                key = {"chat_id": run.chat_id, "run_id": run.run_id, "created_at": run.created_at}
                run_rows.append({**values, **key, "revision": run.revision})
            for seq, step in enumerate(item.steps, start=1):
                record = _step_record(step, seq, now)
                step_rows.append(step_values(record, self.record_body(record)))
        return written, tables

    def _chat_values(self, item: LoadedChat, now: datetime) -> dict[str, Any]:
        """The chat's row as ``insert_chat`` and then ``insert_messages`` leave it."""
        chat = item.chat
        if item.messages:
            chat = chat.model_copy(update={"last_message_at": now, "updated_at": now})
        values = {
            **_chat_columns(chat),
            "chat_id": chat.chat_id,
            "dedup_key": chat.dedup_key,
            "user_id": chat.user_id,
            "thread_id": chat.thread_id,
            "revision": 1 if item.messages else 0,
            "next_seq": len(item.messages) + 1,
            "next_step_seq": len(item.steps) + 1,
            "created_at": chat.created_at,
            "last_message_at": chat.last_message_at,
            "body": self.record_body(chat),
        }
        return {f"v_{name}": value for name, value in values.items()}


def _step_record(step: Step, seq: int, now: datetime) -> Step:
    """A new step as ``save_steps`` stores it: its seq, ``created_at`` kept or now."""
    return step.model_copy(
        update={"seq": seq, "created_at": step.created_at or now, "updated_at": now}
    )


def _refuse_stored_steps(stored: Sequence[Any]) -> None:
    if stored:
        msg = f"load_chats writes new steps only; step {stored[0]} is stored already"
        raise Conflict(msg)
