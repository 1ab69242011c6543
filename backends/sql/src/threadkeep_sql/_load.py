"""``load_messages``: the bulk path of ``Store.load_messages`` (COPY / multi-row inserts).

One transaction per batch, on either engine:

1. lock the chat's row (``SELECT next_seq ... FOR UPDATE``, only a live, hot chat): every
   append of the chat takes that lock first (the one-statement append's ``UPDATE chats``
   and the transactional path's ``FOR UPDATE``), so while it is held no other writer can
   store a message in the chat, and what is read or proved next stays true until commit;
2. prove which of the batch's ``agui_id``s the chat stores (below); a stored one with a
   different fingerprint raises ``IdempotencyConflict`` before anything is written;
3. write the other messages with their seqs (``next_seq``, ``next_seq + 1``...) and their
   ``message_refs`` rows: PostgreSQL streams them with ``COPY`` (asyncpg
   ``copy_records_to_table``, the binary protocol), SQLite with one ``executemany`` of the
   compiled ``INSERT``;
4. move the chat's ``next_seq`` past them and bump its ``revision``, ``last_message_at``
   and ``updated_at``.

Step 2 on PostgreSQL, after one statement that reads the chat's highest seq and whether
the batch's first ``agui_id`` is stored (``_TOP``):

- the chat holds no message: nothing can be stored, nothing is read (a first load's
  first batch);
- the first id is not stored (a first load's next batches, the new part of a resumed
  load): the batch is written first, inside a savepoint, and the unique index
  ``ux_messages_agui`` on ``(chat_id, agui_id)`` is the proof that every id is new. A
  ``COPY`` it refuses (any unique violation) is rolled back to the savepoint and the batch
  takes the next path, in the same transaction under the same lock, so its result and its
  errors are that path's;
- otherwise (a re-run): one aggregate read (``_PRESENT_COUNT``, one probe of the index
  per id) answers "none stored" or "all stored with the same fingerprint" in one row; only
  a batch in between reads the stored rows (``_PRESENT``).

SQLite reads the batch's ids always (one ``json_each`` read on the same index, cheap
there). A batch whose messages are all stored already writes nothing (steps 3 and 4 are
skipped). On SQLite the four steps run as one function on the connection's thread
(:func:`threadkeep_sql._lite.run_on_thread`, inside ``BEGIN IMMEDIATE``): one hand-off to
that thread per batch instead of one per statement.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any
from uuid import UUID

import asyncpg  # type: ignore[import-untyped]
import sqlalchemy as sa
from asyncpg.pgproto import pgproto  # type: ignore[import-untyped]

from threadkeep import CapabilityNotSupported, PreparedMessage
from threadkeep.driver import resolve_batch

from ._base import message_values, ref_values
from ._lite import LiteOps, run_on_thread
from ._messages import _BUMP_CHAT, _LOCK_HOT_CHAT, _TOP_SEQ, MessagesMixin, repaired_next_seq
from ._runner import RawStatement
from ._schema import escape_key, message_refs, messages, unescape_key

__all__ = ["LoadMixin"]

_LOCK = """
SELECT next_seq FROM chats
 WHERE chat_id = $1 AND deleted_at IS NULL AND status = 'active'
   FOR UPDATE
"""
_PRESENT = """
SELECT m.agui_id, m.fingerprint, m.seq
  FROM unnest($2::text[]) AS wanted(agui_id),
       LATERAL (SELECT agui_id, fingerprint, seq FROM messages
                 WHERE chat_id = $1 AND agui_id = wanted.agui_id LIMIT 1) AS m
"""
"""The batch's stored ``agui_id``s: one probe of ``ux_messages_agui`` per id.

Written as a lateral lookup so that the plan cannot depend on the table's statistics:
``agui_id = ANY($2)`` was planned, right after a bulk load (statistics not yet updated),
as a scan of every row of the chat filtered by the array, so each batch read the whole
chat: a million-message load read the chat 200 times (162 ms a batch at 100,000 rows)."""
_PRESENT_COUNT = """
SELECT count(*), count(*) FILTER (WHERE m.fingerprint = wanted.fingerprint)
  FROM unnest($2::text[], $3::text[]) AS wanted(agui_id, fingerprint),
       LATERAL (SELECT fingerprint FROM messages
                 WHERE chat_id = $1 AND agui_id = wanted.agui_id LIMIT 1) AS m
"""
"""How many of the batch's ``agui_id``s the chat stores, and how many of those with the
batch's fingerprint: the same probes as ``_PRESENT``, one row back instead of a row per
stored id."""
_TOP = """
SELECT (SELECT max(seq) FROM messages WHERE chat_id = $1),
       EXISTS (SELECT FROM messages WHERE chat_id = $1 AND agui_id = $2)
"""
"""The chat's highest seq (to repair a counter behind a row) and whether the batch's first
``agui_id`` is stored (``$2``; ``NULL`` is never found): one round trip, two index probes.
A stored first id (a re-run, a resumed load) makes the batch read before it writes."""
_BUMP = """
UPDATE chats SET next_seq = $2, revision = revision + 1, last_message_at = $3, updated_at = $3
 WHERE chat_id = $1
"""
_MESSAGE_COLUMNS = (
    "chat_id",
    "seq",
    "message_id",
    "agui_id",
    "role",
    "kind",
    "run_id",
    "request_id",
    "block_id",
    "revision",
    "created_at",
    "updated_at",
    "fingerprint",
    "body",
)
_REF_COLUMNS = ("chat_id", "seq", "kind", "position", "item_id", "agui_id")
_m = messages.c
_IDS = sa.func.json_each(sa.bindparam("ids", type_=sa.String)).table_valued("value")
_PRESENT_LITE = sa.select(_m.agui_id, _m.fingerprint, _m.seq).where(
    _m.chat_id == sa.bindparam("chat_id"), _m.agui_id.in_(sa.select(_IDS.c.value))
)
"""The batch's stored ``agui_id``s on SQLite: the ids (escaped, as the column holds them)
go as one JSON array, so one statement of fixed text serves any batch size."""
_INSERT_MESSAGES = sa.insert(messages)
_INSERT_REFS = sa.insert(message_refs)


def _key(value: str | None) -> str | None:
    return None if value is None else escape_key(value)


def _plan(
    chat_id: UUID,
    items: Sequence[PreparedMessage],
    present: dict[str, tuple[str, int]],
    next_seq: int,
) -> list[int | None]:
    """Return each item's new seq (``None``: stored already), checking fingerprints.

    Raises:
        IdempotencyConflict: If a stored ``agui_id`` has another fingerprint.
    """
    seqs: list[int | None] = []
    for stored_seq in resolve_batch(chat_id, items, present.get):
        if stored_seq is not None:
            seqs.append(None)
            continue
        seqs.append(next_seq)
        next_seq += 1
    return seqs


def _unnamed_new(items: Sequence[PreparedMessage], next_seq: int) -> list[int | None]:
    """Seqs when every ``agui_id`` of the batch is stored alike: new are those without one."""
    seqs: list[int | None] = []
    for item in items:
        if item.message.agui_id is None:
            seqs.append(next_seq)
            next_seq += 1
        else:
            seqs.append(None)
    return seqs


class LoadMixin(MessagesMixin):
    """``load_messages`` (``threadkeep.driver``), see the module docstring."""

    async def load_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[int | None] | None:
        if self._db.dialect == "postgresql":
            if not self._db.has_raw_driver:
                # Behind a transaction pooler there is no raw asyncpg connection for COPY:
                # core then loads through _insert_messages, same guarantees, slower.
                raise CapabilityNotSupported("bulk load (COPY) is off behind a transaction pooler")
            return await self._load_postgres(chat_id, messages, now)
        return await self._load_sqlite(chat_id, messages, now)

    async def _load_postgres(
        self, chat_id: UUID, items: Sequence[PreparedMessage], now: datetime
    ) -> list[int | None] | None:
        first = next((i.message.agui_id for i in items), None)
        seqs: list[int | None]
        async with self._db.raw_transaction() as driver:
            next_seq = await driver.fetchval(_LOCK, chat_id)
            if next_seq is None:
                return None
            top, first_stored = await driver.fetchrow(_TOP, chat_id, _key(first))
            next_seq = repaired_next_seq(chat_id, next_seq, top)
            if top is None:  # the chat holds no message: none of the batch is stored
                seqs = list(range(next_seq, next_seq + len(items)))
                await _write(driver, chat_id, items, seqs, next_seq=next_seq, now=now)
            elif not first_stored:  # likely a first load (or its next part): write first
                seqs = await _write_expecting_new(driver, chat_id, items, next_seq, now)
            else:  # likely a re-run: read first
                seqs = await _probe(driver, chat_id, items, next_seq)
                await _write(driver, chat_id, items, seqs, next_seq=next_seq, now=now)
        return seqs

    async def _load_sqlite(
        self, chat_id: UUID, items: Sequence[PreparedMessage], now: datetime
    ) -> list[int | None] | None:
        work = partial(_load_on_thread, chat_id=chat_id, items=items, now=now)
        return await run_on_thread(self._db, work, write=True)


async def _probe(
    driver: Any, chat_id: UUID, items: Sequence[PreparedMessage], next_seq: int
) -> list[int | None]:
    """Each item's new seq (``None``: stored already), from the chat's stored ``agui_id``s.

    First one aggregate read (``_PRESENT_COUNT``: how many of the batch's ids are stored,
    how many of those with the batch's fingerprint), which settles the two common cases
    in one row: none stored (a first load) and every one stored with the same payload (a
    re-run). Only a batch in between (where a cut load resumes) or one holding a
    conflict reads the stored rows themselves (``_PRESENT``).

    Raises:
        IdempotencyConflict: If a stored ``agui_id`` has another fingerprint.
    """
    aguis: list[str] = []
    prints: list[str] = []
    for item in items:
        agui_id = item.message.agui_id
        if agui_id is not None:
            aguis.append(escape_key(agui_id))
            prints.append(item.fingerprint)
    if not aguis:
        return list(range(next_seq, next_seq + len(items)))
    found, same = await driver.fetchrow(_PRESENT_COUNT, chat_id, aguis, prints)
    if found == 0:
        return list(range(next_seq, next_seq + len(items)))
    if same == found == len(aguis):  # all stored alike: only messages without an id are new
        return _unnamed_new(items, next_seq)
    present: dict[str, tuple[str, int]] = {}
    for agui_id, fingerprint, seq in await driver.fetch(_PRESENT, chat_id, aguis):
        present[unescape_key(agui_id)] = (fingerprint, seq)
    return _plan(chat_id, items, present, next_seq)


async def _write(
    driver: Any,
    chat_id: UUID,
    items: Sequence[PreparedMessage],
    seqs: Sequence[int | None],
    *,
    next_seq: int,
    now: datetime,
) -> None:
    """COPY the batch's new rows and move the chat's counter (nothing if none is new)."""
    rows, refs = _records(chat_id, items, seqs, now)
    if not rows:
        return
    await driver.copy_records_to_table("messages", records=rows, columns=_MESSAGE_COLUMNS)
    if refs:
        await driver.copy_records_to_table("message_refs", records=refs, columns=_REF_COLUMNS)
    await driver.execute(_BUMP, chat_id, next_seq + len(rows), now)


async def _write_expecting_new(
    driver: Any, chat_id: UUID, items: Sequence[PreparedMessage], next_seq: int, now: datetime
) -> list[int | None]:
    """Write the batch as all new, with ``ux_messages_agui`` as the proof; read on a clash.

    The unique index on ``(chat_id, agui_id)`` refuses a row whose ``agui_id`` the chat
    stores, so a ``COPY`` that goes through proves every id of the batch new, exactly as
    the read would have (and at no cost to the server). A refused ``COPY`` (any unique
    violation) is rolled back to the savepoint taken before it, and the batch goes the
    ordinary way (:func:`_probe`, then the write), inside the same transaction and under
    the same lock: the result, and any error, are the ordinary path's.
    """
    seqs: list[int | None] = list(range(next_seq, next_seq + len(items)))
    await driver.execute("SAVEPOINT threadkeep_load")
    try:
        await _write(driver, chat_id, items, seqs, next_seq=next_seq, now=now)
    except asyncpg.UniqueViolationError:
        await driver.execute("ROLLBACK TO SAVEPOINT threadkeep_load")
    else:
        return seqs
    seqs = await _probe(driver, chat_id, items, next_seq)
    await _write(driver, chat_id, items, seqs, next_seq=next_seq, now=now)
    return seqs


def _load_on_thread(
    ops: LiteOps, chat_id: UUID, items: Sequence[PreparedMessage], now: datetime
) -> list[int | None] | None:
    """The SQLite batch inside ``BEGIN IMMEDIATE``, on the connection's thread (one hop)."""
    next_seq = ops.scalar(_LOCK_HOT_CHAT, {"chat_id": chat_id})  # BEGIN IMMEDIATE holds the file
    if next_seq is None:
        return None
    next_seq = repaired_next_seq(chat_id, next_seq, ops.scalar(_TOP_SEQ, {"chat_id": chat_id}))
    aguis = [escape_key(i.message.agui_id) for i in items if i.message.agui_id is not None]
    present: dict[str, tuple[str, int]] = {}
    if aguis:
        params = {"chat_id": chat_id, "ids": json.dumps(aguis)}
        for agui_id, fingerprint, seq in ops.all(_PRESENT_LITE, params):
            present[agui_id] = (fingerprint, seq)
    seqs = _plan(chat_id, items, present, next_seq)
    insert = ops.compiled(_INSERT_MESSAGES)
    rows = _lite_rows(insert, chat_id, items, seqs, now)
    if rows is None:  # the table's columns are not the ones known here: the generic path
        rows = [
            tuple(insert.args(message_values(item, chat_id, seq, now)))
            for item, seq in zip(items, seqs, strict=True)
            if seq is not None
        ]
    refs: list[dict[str, Any]] = []
    for item, seq in zip(items, seqs, strict=True):
        if seq is not None and (item.message.tool_calls or item.message.reasonings):
            refs += ref_values(item.message, chat_id, seq)
    if rows:
        ops.execute_many_raw(insert, rows)
        if refs:
            ops.execute_many(_INSERT_REFS, refs)
        bump = {"b_chat_id": chat_id, "b_next_seq": next_seq + len(rows), "now": now}
        ops.execute_many(_BUMP_CHAT, [bump])
    return seqs


_LITE_COLUMNS = (*_MESSAGE_COLUMNS[:12], "deleted_at", *_MESSAGE_COLUMNS[12:])
"""The columns of SQLite's compiled ``INSERT INTO messages``, in its parameter order."""


def _identity(value: Any) -> Any:
    return value


def _lite_rows(
    raw: RawStatement,
    chat_id: UUID,
    items: Sequence[PreparedMessage],
    seqs: Sequence[int | None],
    now: datetime,
) -> list[tuple[Any, ...]] | None:
    """The new messages' rows as ``raw``'s positional parameters, processed as it would.

    :meth:`RawStatement.args` of :func:`message_values`, with the bind processors of
    the values every row shares (the chat, the time, revision 0) run once per batch
    instead of once per row. ``None`` if ``raw`` has other parameters than these columns.
    """
    if raw.names != _LITE_COLUMNS:
        return None
    process = {name: bind or _identity for name, bind in zip(raw.names, raw.binds, strict=True)}
    chat, stamp = process["chat_id"](chat_id), process["updated_at"](now)
    revision, deleted = process["revision"](0), process["deleted_at"](None)
    as_uuid, as_key, as_when = process["message_id"], process["agui_id"], process["created_at"]
    if any(process[name] is not as_key for name in ("run_id", "request_id", "block_id")):
        return None
    rows: list[tuple[Any, ...]] = []
    for item, seq in zip(items, seqs, strict=True):
        if seq is None:
            continue
        fields = item.message.__dict__
        agui_id, run_id, created = fields["agui_id"], fields["run_id"], fields["created_at"]
        request_id, block_id = fields["request_id"], fields["block_id"]
        rows.append(
            (
                chat,
                seq,
                as_uuid(fields["message_id"]),
                None if agui_id is None else as_key(agui_id),
                fields["role"]._value_,
                fields["kind"]._value_,
                None if run_id is None else as_key(run_id),
                None if request_id is None else as_key(request_id),
                None if block_id is None else as_key(block_id),
                revision,
                stamp if created is None else as_when(created),
                stamp,
                deleted,
                item.fingerprint,
                item.body,
            )
        )
    return rows


def _records(
    chat_id: UUID, items: Sequence[PreparedMessage], seqs: Sequence[int | None], now: datetime
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Return the ``messages`` and ``message_refs`` records to COPY (key columns escaped).

    The chat id is asyncpg's own ``UUID`` (the same value), which its binary encoder
    copies as it is; a ``uuid.UUID`` costs a call of its ``bytes`` property in every row.
    """
    chat = pgproto.UUID(chat_id.bytes)
    rows: list[tuple[Any, ...]] = []
    refs: list[tuple[Any, ...]] = []
    for item, seq in zip(items, seqs, strict=True):
        if seq is None:
            continue
        fields = item.message.__dict__  # the field values, without lookups through the model
        agui_id, run_id = fields["agui_id"], fields["run_id"]
        request_id, block_id = fields["request_id"], fields["block_id"]
        rows.append(
            (
                chat,
                seq,
                fields["message_id"],
                None if agui_id is None else escape_key(agui_id),
                fields["role"]._value_,
                fields["kind"]._value_,
                None if run_id is None else escape_key(run_id),
                None if request_id is None else escape_key(request_id),
                None if block_id is None else escape_key(block_id),
                0,
                fields["created_at"] or now,
                now,
                item.fingerprint,
                item.body,
            )
        )
        if fields["tool_calls"] or fields["reasonings"]:
            refs += _ref_records(chat, seq, item)
    return rows, refs


def _ref_records(chat: UUID, seq: int, item: PreparedMessage) -> list[tuple[Any, ...]]:
    """The ``message_refs`` records of one message's tool calls and reasonings."""
    refs: list[tuple[Any, ...]] = []
    for position, call in enumerate(item.message.tool_calls):
        refs.append((chat, seq, "tool_call", position, call.tool_call_id, _key(call.agui_id)))
    for position, reasoning in enumerate(item.message.reasonings):
        item_id = reasoning.reasoning_id
        refs.append((chat, seq, "reasoning", position, item_id, _key(reasoning.agui_id)))
    return refs
