"""Message primitives of the SQL driver: append, read, replace, hide, page, nested lookups."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from threadkeep import (
    Conflict,
    Message,
    MessageFilter,
    MessageKind,
    NestedKind,
    PreparedMessage,
    as_utc,
)
from threadkeep.driver import finish, resolve_batch

from ._base import SqlBase, message_values, ref_values
from ._errors import is_seq_collision, is_unique_violation
from ._group import MAX_CALL_MESSAGES, GroupCommitter
from ._pg_append import append_batch, append_one, written_message
from ._schema import MESSAGE_COLUMNS, chats, message_refs, messages

__all__ = ["MessagesMixin", "repaired_next_seq", "replace_params"]

_log = logging.getLogger("threadkeep_sql")

_NO_SEQ = 2**62  # "before" for a first page: above every seq, so one cached statement serves
# SQLite's first page: a BLOB sorts above every number and text, so a ``seq`` stored as text
# (dynamic typing; damage) is paged and reported, not hidden by ``seq < 2**62`` (issue 12).
_NO_SEQ_SQLITE = b"\xff"
_NO_FILTER = MessageFilter()
# LIMIT 1 written into the SQL: as a bind parameter, PostgreSQL's generic plan for a prepared
# statement cannot cost it (the LATERAL previews measured 1.35x slower with ``LIMIT $1``).
_ONE: sa.ColumnElement[int] = sa.literal_column("1", sa.Integer())
_FAST_ATTEMPTS = 3

_m, _c, _r = messages.c, chats.c, message_refs.c

_CHAT_HOT = sa.exists().where(
    _c.chat_id == sa.bindparam("chat_id"), _c.deleted_at.is_(None), _c.status == "active"
)
_CHAT_LIVE = sa.exists().where(_c.chat_id == _m.chat_id, _c.deleted_at.is_(None))

_PAGE = (
    sa.select(*MESSAGE_COLUMNS)
    .where(
        _m.chat_id == sa.bindparam("chat_id"),
        _m.seq < sa.bindparam("before"),
        _m.deleted_at.is_(None),
        _CHAT_HOT,
    )
    .order_by(_m.seq.desc())
    .limit(sa.bindparam("limit"))
)
_IS_HOT = sa.select(_CHAT_HOT)
_LOCK_HOT_CHAT = (
    sa.select(_c.next_seq)
    .where(_c.chat_id == sa.bindparam("chat_id"), _c.deleted_at.is_(None), _c.status == "active")
    .with_for_update()
)
# The chat's highest stored seq, for the repair of a counter a row written around the store
# got ahead of (``repaired_next_seq``); ``< _NO_SEQ`` keeps SQLite's text seqs (sorted above
# every integer) out, and reads one entry of the primary key's index.
_TOP_SEQ = sa.select(sa.func.max(_m.seq)).where(
    _m.chat_id == sa.bindparam("chat_id"), _m.seq < _NO_SEQ
)
_BUMP_CHAT = (
    sa.update(chats)
    .where(_c.chat_id == sa.bindparam("b_chat_id"))
    .values(
        next_seq=sa.bindparam("b_next_seq"),
        revision=_c.revision + 1,
        last_message_at=sa.bindparam("now"),
        updated_at=sa.bindparam("now"),
    )
)
_GET = sa.select(*MESSAGE_COLUMNS).where(
    _m.message_id == sa.bindparam("message_id"), _m.deleted_at.is_(None), _CHAT_LIVE
)
_GET_BY_AGUI = sa.select(*MESSAGE_COLUMNS).where(
    _m.chat_id == sa.bindparam("chat_id"),
    _m.agui_id == sa.bindparam("agui_id"),
    _m.deleted_at.is_(None),
    _CHAT_LIVE,
)
_GET_BY_AGUI_IN_HOT_CHAT = sa.select(*MESSAGE_COLUMNS).where(
    _m.chat_id == sa.bindparam("chat_id"), _m.agui_id == sa.bindparam("agui_id"), _CHAT_HOT
)
_AFTER = (
    sa.select(*MESSAGE_COLUMNS)
    .where(
        _m.chat_id == sa.bindparam("chat_id"),
        _m.seq > sa.bindparam("after"),
        _m.deleted_at.is_(None),
        _CHAT_LIVE,
    )
    .order_by(_m.seq)
    .limit(sa.bindparam("limit"))
)
_LAST_BOUNDARY = (
    sa.select(*MESSAGE_COLUMNS)
    .where(
        _m.chat_id == sa.bindparam("chat_id"),
        _m.kind == MessageKind.BOUNDARY.value,
        _m.deleted_at.is_(None),
        _CHAT_HOT,
    )
    .order_by(_m.seq.desc())
    .limit(_ONE)
)
_FIND_NESTED = (
    sa.select(*MESSAGE_COLUMNS)
    .join(message_refs, sa.and_(_r.chat_id == _m.chat_id, _r.seq == _m.seq))
    .where(
        _r.item_id == sa.bindparam("item_id"),
        _r.kind == sa.bindparam("kind"),
        _m.deleted_at.is_(None),
        _CHAT_LIVE,
    )
    .order_by(_r.seq.desc())
    .limit(_ONE)
)
_FIND_NESTED_BY_AGUI = (
    sa.select(*MESSAGE_COLUMNS)
    .join(message_refs, sa.and_(_r.chat_id == _m.chat_id, _r.seq == _m.seq))
    .where(
        _r.chat_id == sa.bindparam("chat_id"),
        _r.kind == sa.bindparam("kind"),
        _r.agui_id == sa.bindparam("agui_id"),
        _m.deleted_at.is_(None),
        _CHAT_HOT,
    )
    .order_by(_r.seq.desc())
    .limit(_ONE)
)
_REPLACE = (
    sa.update(messages)
    .where(
        _m.chat_id == sa.bindparam("b_chat_id"),  # prunes a partitioned table to one partition
        _m.message_id == sa.bindparam("b_message_id"),
        _m.revision == sa.bindparam("expected"),
        _m.deleted_at.is_(None),
        _CHAT_LIVE,
    )
    .values(
        body=sa.bindparam("b_body"),
        fingerprint=sa.bindparam("b_fingerprint"),
        revision=sa.bindparam("expected") + 1,
        updated_at=sa.bindparam("now"),
        role=sa.bindparam("b_role"),
        run_id=sa.bindparam("b_run_id"),
        request_id=sa.bindparam("b_request_id"),
        block_id=sa.bindparam("b_block_id"),
    )
    .returning(_m.chat_id, _m.seq, _m.created_at)
)
_DELETE_REFS = sa.delete(message_refs).where(
    _r.chat_id == sa.bindparam("b_chat_id"), _r.seq == sa.bindparam("b_seq")
)
_TOUCH_CHAT = (
    sa.update(chats).where(_c.chat_id == sa.bindparam("b_chat_id")).values(revision=_c.revision + 1)
)


_CHAT_IDS_LITE = sa.func.json_each(sa.bindparam("chat_ids", type_=sa.String)).table_valued("value")
"""SQLite: the chat ids of ``last_messages`` as one JSON array of their stored form (32 hex
digits), so the statement's text is fixed and it runs on the one-hop path (``_lite``)."""


def _last_messages_statement(dialect: str) -> sa.Select[Any]:
    if dialect == "postgresql":
        newest = (
            sa.select(*MESSAGE_COLUMNS)
            .where(_m.chat_id == _c.chat_id, _m.deleted_at.is_(None))
            .order_by(_m.seq.desc())
            .limit(_ONE)
            .lateral("newest")
        )
        ids = sa.bindparam("chat_ids", type_=ARRAY(sa.Uuid()))
        return (
            sa.select(newest)
            .select_from(chats.join(newest, sa.true()))
            .where(_c.chat_id == sa.any_(ids), _c.deleted_at.is_(None), _c.status == "active")
        )
    other = messages.alias("other")
    newest_seq = (
        sa.select(sa.func.max(other.c.seq))
        .where(other.c.chat_id == _c.chat_id, other.c.deleted_at.is_(None))
        .scalar_subquery()
    )
    return (
        sa.select(*MESSAGE_COLUMNS)
        .join(chats, _c.chat_id == _m.chat_id)
        .where(
            _c.chat_id.in_(sa.select(_CHAT_IDS_LITE.c.value)),
            _c.deleted_at.is_(None),
            _c.status == "active",
            _m.seq == newest_seq,
        )
    )


def repaired_next_seq(chat_id: UUID, next_seq: int, top: int | None) -> int:
    """Return the seq the chat's next message gets: ``next_seq``, or past a row in the way.

    Args:
        chat_id: The chat (for the log).
        next_seq: The chat row's counter, read under the chat's lock.
        top: The chat's highest stored integer seq (``None``: no messages).

    Returns:
        ``top + 1`` when a row written outside threadkeep (a restored backup, a manual
        insert, a half-applied migration) holds a seq at or above ``next_seq``, logged as a
        ``WARNING`` on ``threadkeep_sql``; ``next_seq`` otherwise. The caller writes it
        back with the append, in the same transaction.
    """
    if top is None or top < next_seq:
        return next_seq
    _log.warning(
        "threadkeep: chat %s stores seq %d at or above its next seq %d (a row written "
        "outside threadkeep); next seq repaired to %d",
        chat_id,
        top,
        next_seq,
        top + 1,
        extra={"chat_id": str(chat_id), "stored_seq": top, "next_seq": next_seq},
    )
    return top + 1


def replace_params(
    prepared: PreparedMessage, expected_revision: int, now: datetime
) -> dict[str, Any]:
    """Return the parameters of ``_REPLACE`` for a ``replace_message`` call."""
    message = prepared.message
    return {
        "b_chat_id": message.chat_id,
        "b_message_id": message.message_id,
        "expected": expected_revision,
        "b_body": prepared.body,
        "b_fingerprint": prepared.fingerprint,
        "now": now,
        "b_role": message.role.value,
        "b_run_id": message.run_id,
        "b_request_id": message.request_id,
        "b_block_id": message.block_id,
    }


def _filtered_page(message_filter: MessageFilter) -> sa.Select[Any]:
    stmt = _PAGE
    if message_filter.roles is not None:
        stmt = stmt.where(_m.role.in_(sorted(r.value for r in message_filter.roles)))
    if message_filter.kinds is not None:
        stmt = stmt.where(_m.kind.in_(sorted(k.value for k in message_filter.kinds)))
    for field in ("run_id", "request_id", "block_id"):
        wanted = getattr(message_filter, field)
        if wanted is not None:
            stmt = stmt.where(_m[field] == wanted)
    return stmt


class MessagesMixin(SqlBase):
    """Message primitives (``threadkeep.driver``, "messages")."""

    _last_messages_sql: sa.Select[Any]
    _group: GroupCommitter | None = None

    # -- append --------------------------------------------------------------------------

    async def insert_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        return await self._insert_any(chat_id, messages, now)

    async def _insert_any(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        """``insert_messages`` on PostgreSQL, run to completion under cancellation (issue 12).

        The driver declares it (``writes_run_whole``), so core adds no shielded task: a
        call that group commit takes waits for its outcome on its own future
        (``GroupCommitter.append(whole=True)``: no task, no extra loop iteration), and every
        other path runs in ``finish``. A caller cancelled meanwhile gets its
        ``CancelledError`` once the call is written or not, whole.
        """
        if self._group is None or len(messages) > MAX_CALL_MESSAGES:
            return await finish(self._insert_slowly(chat_id, messages, now))
        try:
            first = await self._group.append(chat_id, messages, now, whole=True)
        except Conflict as exc:
            if not is_seq_collision(exc):
                raise
            return await finish(self._insert_transaction(chat_id, messages, now))
        if first is not None:
            return self._written(chat_id, messages, first, now)
        return await finish(self._insert_slowly(chat_id, messages, now, tried=True))

    async def _insert_slowly(
        self,
        chat_id: UUID,
        messages: Sequence[PreparedMessage],
        now: datetime,
        *,
        tried: bool = False,
    ) -> list[tuple[Message, bool]] | None:
        """The fast path's retries, then the transactional path (callers shield it).

        ``tried``: the first fast attempt came back with nothing written already.
        """
        # A row written around the store can hold the seq an append reserved (issue 12):
        # the fast path then fails whole, and the transactional path repairs the counter.
        if self._db.dialect == "postgresql":
            try:
                fast = await self._insert_fast(chat_id, messages, now, tried=tried)
            except Conflict as exc:
                if not is_seq_collision(exc):
                    raise
                fast = None
            if fast is not None:
                return fast
        return await self._insert_transaction(chat_id, messages, now)

    async def _insert_transaction(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        async with self._db.transaction() as conn:
            return await self._insert_locked(conn, chat_id, messages, now)

    def _written(
        self, chat_id: UUID, items: Sequence[PreparedMessage], first: int, now: datetime
    ) -> list[tuple[Message, bool]]:
        """The outcome of a fast append that wrote ``items`` from seq ``first`` on."""
        return [
            (written_message(item.message, chat_id, first + i, now), True)
            for i, item in enumerate(items)
        ]

    async def _insert_fast(
        self,
        chat_id: UUID,
        items: Sequence[PreparedMessage],
        now: datetime,
        *,
        tried: bool = False,
    ) -> list[tuple[Message, bool]] | None:
        """PostgreSQL: one statement per call (the first attempt possibly a group's share).

        ``None`` sends the caller the transactional way: the chat is not hot, or a batch
        holds an ``agui_id`` the chat stores (that path sorts out which are retries).
        ``tried``: the first attempt was made (it wrote nothing): look for a retry first.
        """
        for attempt in range(_FAST_ATTEMPTS):
            if attempt or not tried:
                first = await self._append_call(chat_id, items, now)
                if first is not None:
                    return self._written(chat_id, items, first, now)
            agui_id = items[0].message.agui_id
            if len(items) > 1 or agui_id is None:
                return None
            params = {"chat_id": chat_id, "agui_id": agui_id}
            async with self._db.runner() as run:
                stored = await run.first(_GET_BY_AGUI_IN_HOT_CHAT, params)
            if stored is not None:
                return [(self._message_row(stored), False)]
            # Nothing inserted and nothing stored: the stored message went away; try again.
        return None

    async def _append_call(
        self, chat_id: UUID, items: Sequence[PreparedMessage], now: datetime
    ) -> int | None:
        """One call in one statement of its own; its first seq, or ``None`` if not written.

        ``None``: the chat is not hot, an ``agui_id`` is stored already, or (a batch) a
        racing duplicate took one meanwhile (nothing written).
        """
        async with self._db.runner(write=True) as run:
            if len(items) == 1:
                return await append_one(run, chat_id, items[0], now)
            try:
                return await append_batch(run, chat_id, items, now)
            except Exception as exc:
                if is_unique_violation(exc):  # a racing duplicate: nothing was written
                    return None
                raise

    def _new(self, item: PreparedMessage, chat_id: UUID, seq: int, now: datetime) -> Message:
        created = item.message.created_at or now
        return self._stored(item, chat_id, seq, revision=0, created_at=created, updated_at=now)

    async def _insert_locked(
        self,
        conn: AsyncConnection,
        chat_id: UUID,
        items: Sequence[PreparedMessage],
        now: datetime,
    ) -> list[tuple[Message, bool]] | None:
        """Append inside a write transaction: lock the chat, check agui ids, insert, bump.

        The chat's seq counter is checked against its highest stored seq first (one probe
        of the primary key's index) and repaired when a row written around the store got
        ahead of it (``repaired_next_seq``).
        """
        next_seq = await self._lock_hot_chat(conn, chat_id)
        if next_seq is None:
            return None
        top = (await conn.execute(_TOP_SEQ, {"chat_id": chat_id})).scalar()
        next_seq = repaired_next_seq(chat_id, next_seq, top)
        existing = await self._stored_by_agui(conn, chat_id, items)
        results: list[tuple[Message, bool]] = []
        rows: list[dict[str, Any]] = []
        refs: list[dict[str, Any]] = []
        for item, stored in zip(items, resolve_batch(chat_id, items, existing.get), strict=True):
            if stored is not None:
                results.append((stored, False))
                continue
            rows.append(message_values(item, chat_id, next_seq, now))
            refs += ref_values(item.message, chat_id, next_seq)
            results.append((self._new(item, chat_id, next_seq, now), True))
            next_seq += 1
        if rows:
            await conn.execute(sa.insert(messages), rows)
            if refs:
                await conn.execute(sa.insert(message_refs), refs)
            await conn.execute(
                _BUMP_CHAT, {"b_chat_id": chat_id, "b_next_seq": next_seq, "now": now}
            )
        return results

    async def _lock_hot_chat(self, conn: AsyncConnection, chat_id: UUID) -> int | None:
        """Lock a live, hot chat's row for this transaction; return its next seq or ``None``."""
        next_seq: int | None = (await conn.execute(_LOCK_HOT_CHAT, {"chat_id": chat_id})).scalar()
        return next_seq

    async def _stored_by_agui(
        self, conn: AsyncConnection, chat_id: UUID, items: Sequence[PreparedMessage]
    ) -> dict[str, tuple[str, Message]]:
        aguis = [item.message.agui_id for item in items if item.message.agui_id is not None]
        if not aguis:
            return {}
        stmt = sa.select(_m.agui_id, *MESSAGE_COLUMNS).where(
            _m.chat_id == chat_id, _m.agui_id.in_(aguis)
        )
        found: dict[str, tuple[str, Message]] = {}
        for agui_id, *row in (await conn.execute(stmt)).all():
            found[agui_id] = (row[7], self._message_row(row))
        return found

    # -- single messages -----------------------------------------------------------------

    async def get_message(self, message_id: UUID) -> Message | None:
        return await self._one(_GET, {"message_id": message_id})

    async def get_message_by_agui_id(self, chat_id: UUID, agui_id: str) -> Message | None:
        return await self._one(_GET_BY_AGUI, {"chat_id": chat_id, "agui_id": agui_id})

    async def _one(self, stmt: sa.Executable, params: dict[str, Any]) -> Message | None:
        async with self._db.runner() as run:
            row = await run.first(stmt, params)
        return None if row is None else self._message_row(row)

    async def replace_message(
        self, prepared: PreparedMessage, expected_revision: int, now: datetime
    ) -> Message | None:
        message = prepared.message
        async with self._db.transaction() as conn:
            params = replace_params(prepared, expected_revision, now)
            row = (await conn.execute(_REPLACE, params)).first()
            if row is None:
                return None
            chat_id, seq, created_at = row
            await conn.execute(_DELETE_REFS, {"b_chat_id": chat_id, "b_seq": seq})
            refs = ref_values(message, chat_id, seq)
            if refs:
                await conn.execute(sa.insert(message_refs), refs)
            await conn.execute(_TOUCH_CHAT, {"b_chat_id": chat_id})
        return self._replaced(prepared, expected_revision, now, (chat_id, seq, created_at))

    def _replaced(
        self,
        prepared: PreparedMessage,
        expected_revision: int,
        now: datetime,
        row: Sequence[Any],
    ) -> Message:
        """The stored form of a replaced message from ``_REPLACE``'s returned row."""
        chat_id, seq, created_at = row
        return self._stored(
            prepared,
            chat_id,
            seq,
            revision=expected_revision + 1,
            created_at=as_utc(created_at),
            updated_at=now,
        )

    async def hide_messages(self, chat_id: UUID, message_ids: Sequence[UUID], now: datetime) -> int:
        if not message_ids:
            return 0
        hide = (
            sa.update(messages)
            .where(_m.chat_id == chat_id, _m.message_id.in_(list(message_ids)))
            .where(_m.deleted_at.is_(None))
            .values(deleted_at=now, updated_at=now, revision=_m.revision + 1)
        )
        async with self._db.transaction() as conn:
            hidden = (await conn.execute(hide)).rowcount
            if hidden:
                await conn.execute(_TOUCH_CHAT, {"b_chat_id": chat_id})
        return hidden

    # -- pages ---------------------------------------------------------------------------

    async def page_messages(
        self,
        chat_id: UUID,
        message_filter: MessageFilter,
        before_seq: int | None,
        limit: int,
    ) -> list[Message] | None:
        first = _NO_SEQ if self._db.dialect == "postgresql" else _NO_SEQ_SQLITE
        params = {
            "chat_id": chat_id,
            "before": first if before_seq is None else before_seq,
            "limit": limit,
        }
        hot: Any = True
        if message_filter == _NO_FILTER:
            async with self._db.runner() as run:
                rows = await run.all(_PAGE, params)
                if not rows:
                    hot = await run.scalar(_IS_HOT, {"chat_id": chat_id})
        else:  # built per call (IN lists): through SQLAlchemy, which caches its compilation
            async with self._db.read() as conn:
                rows = (await conn.execute(_filtered_page(message_filter), params)).all()
                if not rows:
                    hot = (await conn.execute(_IS_HOT, {"chat_id": chat_id})).scalar()
        return self._message_rows(rows) if hot else None

    async def messages_after(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        async with self._db.runner() as run:
            params = {"chat_id": chat_id, "after": after_seq, "limit": limit}
            rows = await run.all(_AFTER, params)
        return self._message_rows(rows)

    async def last_boundary(self, chat_id: UUID) -> Message | None:
        return await self._one(_LAST_BOUNDARY, {"chat_id": chat_id})

    async def last_messages(self, chat_ids: Sequence[UUID]) -> dict[UUID, Message]:
        ids: Any = list(chat_ids)
        if self._db.dialect == "sqlite":
            ids = json.dumps([chat_id.hex for chat_id in ids])
        async with self._db.runner() as run:
            rows = await run.all(self._last_messages_sql, {"chat_ids": ids})
        return {m.chat_id: m for m in self._message_rows(rows) if m.chat_id is not None}

    # -- nested lookups ------------------------------------------------------------------

    async def find_nested(self, kind: NestedKind, item_id: UUID) -> Message | None:
        return await self._one(_FIND_NESTED, {"kind": kind, "item_id": item_id})

    async def find_nested_by_agui_id(
        self, kind: NestedKind, chat_id: UUID, agui_id: str
    ) -> Message | None:
        params = {"kind": kind, "chat_id": chat_id, "agui_id": agui_id}
        return await self._one(_FIND_NESTED_BY_AGUI, params)
