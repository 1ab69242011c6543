"""A page of chats with each chat's newest message in one query (``page_chats_with_last``).

PostgreSQL: the chat page as a subquery, ``LEFT JOIN LATERAL`` the newest visible message
of each (``ORDER BY seq DESC LIMIT 1`` on the primary key). SQLite: the same page joined to
the message whose seq a correlated subquery picks the same way (SQLite has no ``LATERAL``).
Only live, active chats get a message, as ``last_messages`` reads.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any
from uuid import UUID

import sqlalchemy as sa

from threadkeep import Chat, ChatFilter, Message
from threadkeep.driver import chats_with_last

from ._base import SqlBase
from ._chats import chat_filter_clauses, chat_filter_shape, needs_recheck
from ._lite import run_on_thread
from ._schema import CHAT_COLUMNS, MESSAGE_COLUMNS, chats, messages

__all__ = ["PreviewsMixin"]

_ONE: sa.ColumnElement[int] = sa.literal_column("1", sa.Integer())
_WIDTH = len(CHAT_COLUMNS)
_STATEMENTS: dict[tuple[Hashable, ...], sa.Select[Any]] = {}


def _page_subquery(shape: tuple[Hashable, ...], after: bool) -> sa.Subquery:
    page = sa.select(*CHAT_COLUMNS, chats.c.status, chats.c.deleted_at).where(
        *chat_filter_clauses(shape)
    )
    if after:
        page = page.where(chats.c.seq < sa.bindparam("before"))
    return page.order_by(chats.c.seq.desc()).limit(sa.bindparam("limit")).subquery("page")


def _newest_seq(page: sa.Subquery) -> sa.ScalarSelect[Any]:
    other = messages.alias("other")
    return (
        sa.select(other.c.seq)
        .where(other.c.chat_id == page.c.chat_id, other.c.deleted_at.is_(None))
        .order_by(other.c.seq.desc())
        .limit(_ONE)
        .scalar_subquery()
    )


def previews_statement(shape: tuple[Hashable, ...], after: bool) -> sa.Select[Any]:
    """Return the one-query page of a filter shape (built once per shape and kept).

    Rows: the chat's ``CHAT_COLUMNS``, then the newest message's ``MESSAGE_COLUMNS``
    (all ``NULL`` when there is none), newest chat first.
    """
    key = (*shape, after)
    stmt = _STATEMENTS.get(key)
    if stmt is not None:
        return stmt
    page = _page_subquery(shape, after)
    live = sa.and_(page.c.deleted_at.is_(None), page.c.status == "active")
    chat_cols = [page.c[col.name] for col in CHAT_COLUMNS]
    if shape[0] == "postgresql":
        m = messages.c
        newest = (
            sa.select(*MESSAGE_COLUMNS)
            .where(m.chat_id == page.c.chat_id, m.deleted_at.is_(None), live)
            .order_by(m.seq.desc())
            .limit(_ONE)
            .lateral("newest")
        )
        joined = page.outerjoin(newest, sa.true())
        message_cols = [newest.c[col.name] for col in MESSAGE_COLUMNS]
    else:
        newest_table = messages.alias("newest")
        n = newest_table.c
        on = sa.and_(n.chat_id == page.c.chat_id, live, n.seq == _newest_seq(page))
        joined = page.outerjoin(newest_table, on)
        message_cols = [n[col.name] for col in MESSAGE_COLUMNS]
    labelled = [col.label(f"m_{col.name}") for col in message_cols]
    stmt = sa.select(*chat_cols, *labelled).select_from(joined).order_by(page.c.seq.desc())
    _STATEMENTS[key] = stmt
    return stmt


class PreviewsMixin(SqlBase):
    """``page_chats_with_last`` in one query (the optional primitive's fast path)."""

    async def page_chats_with_last(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[tuple[Chat, Message | None]]:
        if needs_recheck(chat_filter):  # pages re-checked in Python: the two-step default
            return await chats_with_last(self, chat_filter, before_seq, limit)
        shape, params = chat_filter_shape(chat_filter, self._db.dialect)
        params["limit"] = limit
        if before_seq is not None:
            params["before"] = before_seq
        stmt = previews_statement(shape, before_seq is not None)
        if self._db.dialect == "sqlite":  # one hop to the connection's thread (_lite)
            rows = await run_on_thread(self._db, lambda ops: ops.all(stmt, params), write=False)
        else:
            async with self._db.runner() as run:
                rows = await run.all(stmt, params)
        found = self._chat_rows([row[:_WIDTH] for row in rows])
        message_rows = [row[_WIDTH:] for row in rows if row[_WIDTH] is not None]
        last = self._message_rows(message_rows)
        if len(found) == len(rows) and len(last) == len(message_rows):
            # Nothing was left out (damaged rows under "skip"): pair by position.
            newest = iter(last)
            return [
                (chat, None if row[_WIDTH] is None else next(newest))
                for chat, row in zip(found, rows, strict=True)
            ]
        by_chat: dict[UUID | None, Message] = {m.chat_id: m for m in last}
        return [(chat, by_chat.get(chat.chat_id)) for chat in found]
