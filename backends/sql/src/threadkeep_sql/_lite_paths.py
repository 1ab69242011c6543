"""SQLite hot paths in one thread hop each: the append, the unfiltered page, the replace.

The same statements and the same steps as ``MessagesMixin`` on SQLite (lock the chat's
row with ``BEGIN IMMEDIATE``, look up ``agui_id``s, insert, bump the chat; the page, then
whether the chat is hot when it is empty; the compare-and-set of a replaced message, its
nested ids and the chat's revision), run by :func:`threadkeep_sql._lite.run_on_thread`
as one function on the connection's thread instead of one hand-off per statement
(``replace_message`` was 15 hand-offs through SQLAlchemy, paid by every incremental
AG-UI run). PostgreSQL and filtered pages take the ``MessagesMixin`` paths unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any
from uuid import UUID

import sqlalchemy as sa

from threadkeep import IdempotencyConflict, Message, MessageFilter, PreparedMessage

from ._base import message_values, ref_values
from ._lite import LiteOps, run_on_thread
from ._messages import (
    _BUMP_CHAT,
    _DELETE_REFS,
    _IS_HOT,
    _LOCK_HOT_CHAT,
    _NO_FILTER,
    _NO_SEQ_SQLITE,
    _PAGE,
    _REPLACE,
    _TOP_SEQ,
    _TOUCH_CHAT,
    MessagesMixin,
    repaired_next_seq,
    replace_params,
)
from ._schema import MESSAGE_COLUMNS, message_refs, messages

__all__ = ["LiteMixin"]

_m = messages.c
_BY_AGUI = sa.select(*MESSAGE_COLUMNS).where(
    _m.chat_id == sa.bindparam("chat_id"), _m.agui_id == sa.bindparam("agui_id")
)
_INSERT_MESSAGES = sa.insert(messages)
_INSERT_REFS = sa.insert(message_refs)

_Outcome = tuple[int, Sequence[Any] | None]
"""Per appended item: ``(seq, None)`` when inserted, ``(-1, stored row)`` when already stored."""


def _append(
    ops: LiteOps, chat_id: UUID, items: Sequence[PreparedMessage], now: datetime
) -> list[_Outcome] | None:
    """The whole append inside ``BEGIN IMMEDIATE`` (on the connection's thread)."""
    next_seq = ops.scalar(_LOCK_HOT_CHAT, {"chat_id": chat_id})
    if next_seq is None:
        return None
    # A row written around the store may hold the next seq: repaired in this transaction.
    next_seq = repaired_next_seq(chat_id, next_seq, ops.scalar(_TOP_SEQ, {"chat_id": chat_id}))
    outcomes: list[_Outcome] = []
    rows: list[dict[str, Any]] = []
    refs: list[dict[str, Any]] = []
    for item in items:
        agui_id = item.message.agui_id
        stored = None  # Store.append_messages never sends two items with one agui_id
        if agui_id is not None:
            stored = ops.first(_BY_AGUI, {"chat_id": chat_id, "agui_id": agui_id})
        if stored is not None:
            if stored[7] != item.fingerprint:
                raise IdempotencyConflict(
                    f"agui_id {agui_id!r} is stored in chat {chat_id} "
                    f"(seq {stored[1]}) with a different payload; nothing was written"
                )
            outcomes.append((-1, stored))
            continue
        rows.append(message_values(item, chat_id, next_seq, now))
        refs += ref_values(item.message, chat_id, next_seq)
        outcomes.append((next_seq, None))
        next_seq += 1
    if rows:
        ops.execute_many(_INSERT_MESSAGES, rows)
        if refs:
            ops.execute_many(_INSERT_REFS, refs)
        ops.execute_many(_BUMP_CHAT, [{"b_chat_id": chat_id, "b_next_seq": next_seq, "now": now}])
    return outcomes


def _page(ops: LiteOps, params: dict[str, Any]) -> Sequence[Sequence[Any]] | None:
    """The newest-first page, and ``None`` when it is empty because the chat is not hot."""
    rows = ops.all(_PAGE, params)
    if not rows and not ops.scalar(_IS_HOT, {"chat_id": params["chat_id"]}):
        return None
    return rows


def _replace(ops: LiteOps, params: dict[str, Any], message: Message) -> Sequence[Any] | None:
    """``replace_message``'s transaction: ``(chat_id, seq, created_at)``, or ``None``."""
    rows = ops.all(_REPLACE, params)  # every row fetched: a RETURNING statement is done
    if not rows:
        return None
    chat_id, seq, _created_at = rows[0]
    ops.execute_many(_DELETE_REFS, [{"b_chat_id": chat_id, "b_seq": seq}])
    refs = ref_values(message, chat_id, seq)
    if refs:
        ops.execute_many(_INSERT_REFS, refs)
    ops.execute_many(_TOUCH_CHAT, [{"b_chat_id": chat_id}])
    return rows[0]


class LiteMixin(MessagesMixin):
    """``insert_messages``, unfiltered ``page_messages``, ``replace_message``: SQLite, one hop."""

    async def replace_message(
        self, prepared: PreparedMessage, expected_revision: int, now: datetime
    ) -> Message | None:
        if self._db.dialect != "sqlite":
            return await super().replace_message(prepared, expected_revision, now)
        params = replace_params(prepared, expected_revision, now)
        work = partial(_replace, params=params, message=prepared.message)
        row = await run_on_thread(self._db, work, write=True)
        return None if row is None else self._replaced(prepared, expected_revision, now, row)

    async def insert_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        if self._db.dialect != "sqlite":
            return await self._insert_any(chat_id, messages, now)
        work = partial(_append, chat_id=chat_id, items=messages, now=now)
        outcomes = await run_on_thread(self._db, work, write=True)
        if outcomes is None:
            return None
        return [
            (self._new(item, chat_id, seq, now), True)
            if row is None
            else (self._message_row(row), False)
            for item, (seq, row) in zip(messages, outcomes, strict=True)
        ]

    async def page_messages(
        self,
        chat_id: UUID,
        message_filter: MessageFilter,
        before_seq: int | None,
        limit: int,
    ) -> list[Message] | None:
        if self._db.dialect != "sqlite" or message_filter != _NO_FILTER:
            return await super().page_messages(chat_id, message_filter, before_seq, limit)
        params = {
            "chat_id": chat_id,
            "before": _NO_SEQ_SQLITE if before_seq is None else before_seq,
            "limit": limit,
        }
        rows = await run_on_thread(self._db, partial(_page, params=params), write=False)
        return None if rows is None else self._message_rows(rows)
