"""Group commit (PostgreSQL): single-message appends of concurrent callers share a statement.

A store with many concurrent writers (runs of different users, each appending one message at
a time) pays one statement, one commit and one WAL flush per append. :class:`GroupCommitter`
coalesces them: while one group is being written, the appends that arrive queue up, and the
next group writes all of them in one statement (one commit), whatever their chats:

- an append that finds fewer than :data:`MAX_INFLIGHT` statements in flight runs alone at
  once, in its own task, with the one-statement append of :mod:`threadkeep_sql._pg_append`
  (no added latency for a few writers); past that, appends queue, and as each statement
  finishes a background task writes the queue as one group (up to :data:`MAX_GROUP`
  appends), so the number of statements in flight stays bounded however many writers;
- the group statement (:data:`GROUP_APPEND`) locks the group's chats in ``chat_id`` order
  (so two groups, or a group and another writer, never deadlock), leaves out each append
  whose ``agui_id`` the chat stores already and each chat that is not hot, reserves every
  chat's seqs in one ``UPDATE`` (``last_message_at`` only moves forward: a statement that
  took its time earlier but committed later never sets it back) and inserts the messages
  with ``ON CONFLICT DO NOTHING``;
  it returns, per input position, the seq of each message actually inserted;
- each caller gets its own outcome: its seq, or ``None`` (not inserted: the caller reads the
  stored message or finds the chat is not hot, exactly as after a lone append);
- per-call atomicity is trivial (one message per call), and one caller's failure never fails
  another: two appends of the same ``(chat_id, agui_id)`` never share a group (the second
  waits for the next, where it is a retry), and if the group statement fails as a whole (a
  ``message_id`` taken, a value the database refuses, a lost connection) each append of the
  group is retried alone (in arrival order within each chat), so each caller gets its own
  result or its own error;
- outcomes are matched to callers by key, never by the order rows come back: the group
  statement returns each inserted message's input position (``ord``, joined on the message's
  ``(chat_id, seq)``), and within a group a chat's seqs follow the order its appends
  arrived (``row_number`` over ``ord``). Appends in different statements in flight at once
  (a lone append, another group) are ordered by the chat's row lock, as without grouping;
- the store runs writes to completion under cancellation (``shield_writes``, issue 12), so
  a store caller cancelled while queued has its append written with its group and then gets
  its ``CancelledError``; no other caller is touched. Called directly, a cancelled
  :meth:`GroupCommitter.append` still queued is taken out of the queue (nothing written);
  once sent, its outcome is dropped;
- :meth:`GroupCommitter.close` waits until every append in flight or queued has its
  outcome; an append that a cancelled group leaves without an outcome gets
  ``BackendUnavailable`` (it may or may not be written), so no caller waits forever.

Appends with nested tool calls or reasonings (``message_refs`` rows) and batches go the usual
way; they are rarer, and their statements are already one round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from threadkeep import BackendUnavailable, PreparedMessage

from ._schema import escape_key

__all__ = ["GROUP_APPEND", "MAX_GROUP", "MAX_INFLIGHT", "GroupCommitter"]

MAX_GROUP = 256
"""Appends written by one group statement at most (a count)."""

MAX_INFLIGHT = 8
"""Statements of one store's appends in flight at once: below it an append is sent alone
at once; at it, appends queue and go in the next group statement. Measured here
(``bench/writers_bench.py``), sending a queue of a few appends as a group cost more than
sending them alone, so grouping starts only past 8 concurrent appends."""

GROUP_APPEND = """
WITH u AS (
    SELECT * FROM unnest($1::int[], $2::uuid[], $3::uuid[], $4::text[], $5::text[],
                         $6::text[], $7::text[], $8::text[], $9::text[], $10::timestamptz[],
                         $11::timestamptz[], $12::text[], $13::text[])
           AS u(ord, chat_id, message_id, agui_id, role, kind, run_id, request_id, block_id,
                created_at, updated_at, fingerprint, body)
),
locked AS (
    SELECT chats.chat_id FROM chats
     WHERE chats.chat_id IN (SELECT chat_id FROM u)
       AND chats.deleted_at IS NULL AND chats.status = 'active'
     ORDER BY chats.chat_id
       FOR UPDATE
),
fresh AS (
    SELECT u.*, row_number() OVER (PARTITION BY u.chat_id ORDER BY u.ord) AS rank,
           count(*) OVER (PARTITION BY u.chat_id) AS n,
           max(u.updated_at) OVER (PARTITION BY u.chat_id) AS newest
      FROM u JOIN locked USING (chat_id)
     WHERE u.agui_id IS NULL
        OR NOT EXISTS (SELECT 1 FROM messages
                        WHERE messages.chat_id = u.chat_id AND messages.agui_id = u.agui_id)
),
c AS (
    UPDATE chats
       SET next_seq = chats.next_seq + f.n, revision = chats.revision + 1,
           last_message_at = GREATEST(chats.last_message_at, f.newest),
           updated_at = GREATEST(chats.updated_at, f.newest)
      FROM (SELECT DISTINCT chat_id, n, newest FROM fresh) AS f
     WHERE chats.chat_id = f.chat_id
 RETURNING chats.chat_id, chats.next_seq - f.n AS first_seq
),
m AS (
    INSERT INTO messages (chat_id, seq, message_id, agui_id, role, kind, run_id, request_id,
                          block_id, revision, created_at, updated_at, fingerprint, body)
    SELECT fresh.chat_id, c.first_seq + fresh.rank - 1, fresh.message_id, fresh.agui_id,
           fresh.role, fresh.kind, fresh.run_id, fresh.request_id, fresh.block_id, 0,
           fresh.created_at, fresh.updated_at, fresh.fingerprint, fresh.body
      FROM fresh JOIN c USING (chat_id)
     ORDER BY fresh.ord
    ON CONFLICT (chat_id, agui_id) WHERE agui_id IS NOT NULL DO NOTHING
 RETURNING chat_id, seq
)
SELECT fresh.ord, m.seq
  FROM fresh JOIN c USING (chat_id)
  JOIN m ON m.chat_id = fresh.chat_id AND m.seq = c.first_seq + fresh.rank - 1
"""
"""One statement for a group of single-message appends (see the module docstring)."""

Lone = Callable[[UUID, PreparedMessage, datetime], Awaitable["int | None"]]
Raw = Callable[[], Any]  # an async context manager yielding an asyncpg connection


def _key(value: str | None) -> str | None:
    return None if value is None else escape_key(value)


def _future() -> asyncio.Future[int | None]:
    return asyncio.get_running_loop().create_future()


@dataclass(slots=True, eq=False)  # found in the queue by identity
class _Pending:
    chat_id: UUID
    item: PreparedMessage
    now: datetime
    done: asyncio.Future[int | None] = field(default_factory=_future)

    @property
    def key(self) -> tuple[UUID, str] | None:
        agui_id = self.item.message.agui_id
        return None if agui_id is None else (self.chat_id, agui_id)


class GroupCommitter:
    """Coalesces concurrent single-message appends into group statements (module docstring).

    Args:
        lone: Appends one message alone (the one-statement append); returns its seq or
            ``None``. Also what every append of a failed group is retried with.
        raw: Returns an async context manager yielding a pooled asyncpg connection in
            autocommit mode, native errors mapped (``Database.raw_connection``).
    """

    def __init__(self, lone: Lone, raw: Raw) -> None:
        self._lone = lone
        self._raw = raw
        self._inflight = 0
        self._queue: list[_Pending] = []
        self._drainers: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    async def append(self, chat_id: UUID, item: PreparedMessage, now: datetime) -> int | None:
        """Append one message (no nested items); return its seq, or ``None`` if not inserted.

        ``None`` means what it means for ``append_one``: the chat is not hot, or the
        ``agui_id`` is stored in the chat already.

        Raises:
            ThreadkeepError: This append's own error (``Conflict``, ``InvalidArgument``,
                ``BackendUnavailable``...), never another caller's.
        """
        if self._inflight < MAX_INFLIGHT:
            self._enter()
            try:
                return await self._lone(chat_id, item, now)
            finally:
                self._leave()
        pending = _Pending(chat_id, item, now)
        self._queue.append(pending)
        self._idle.clear()
        try:
            return await asyncio.shield(pending.done)
        except asyncio.CancelledError:
            if pending in self._queue:  # not sent yet: nothing written, others untouched
                self._queue.remove(pending)
                self._settle()
            else:  # sent: its outcome has no one to go to
                pending.done.add_done_callback(_drop)
            raise

    async def close(self) -> None:
        """Wait until every append in flight or queued has its outcome (before the pool closes).

        Appends that arrive while it waits are waited for too.
        """
        while not self._idle.is_set() or self._drainers:
            await self._idle.wait()
            if self._drainers:
                await asyncio.gather(*self._drainers, return_exceptions=True)

    def _enter(self) -> None:
        self._inflight += 1
        self._idle.clear()

    def _leave(self) -> None:
        self._inflight -= 1
        self._start_drainers()
        self._settle()

    def _settle(self) -> None:
        if not self._inflight and not self._queue:
            self._idle.set()

    def _start_drainers(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue and self._inflight < MAX_INFLIGHT:
            self._enter()
            group, self._queue = _take_group(self._queue)
            task = loop.create_task(self._drain(group))
            self._drainers.add(task)
            task.add_done_callback(self._drainers.discard)

    async def _drain(self, group: list[_Pending]) -> None:
        try:
            await self._write(group)
        finally:
            for pending in group:  # cancelled mid-way: no caller may wait forever
                if not pending.done.done():
                    pending.done.set_exception(_interrupted())
            self._leave()

    async def _write(self, group: list[_Pending]) -> None:
        if len(group) == 1:
            await self._alone(group[0])
            return
        try:
            seqs = await self._write_group(group)
        except Exception:  # noqa: BLE001 - isolate: each append alone gets its own outcome
            await asyncio.gather(*(self._in_order(chat) for chat in _by_chat(group)))
            return
        for index, pending in enumerate(group):
            if not pending.done.done():
                pending.done.set_result(seqs.get(index))

    async def _in_order(self, appends: list[_Pending]) -> None:
        for pending in appends:  # one chat's appends, in arrival order
            await self._alone(pending)

    async def _alone(self, pending: _Pending) -> None:
        try:
            result = await self._lone(pending.chat_id, pending.item, pending.now)
        except Exception as exc:  # noqa: BLE001 - handed to its own caller
            if not pending.done.done():
                pending.done.set_exception(exc)
            return
        if not pending.done.done():
            pending.done.set_result(result)

    async def _write_group(self, group: list[_Pending]) -> dict[int, int]:
        messages = [p.item.message for p in group]
        args = [
            list(range(len(group))),
            [p.chat_id for p in group],
            [m.message_id for m in messages],
            [_key(m.agui_id) for m in messages],
            [m.role.value for m in messages],
            [m.kind.value for m in messages],
            [_key(m.run_id) for m in messages],
            [_key(m.request_id) for m in messages],
            [_key(m.block_id) for m in messages],
            [m.created_at or p.now for m, p in zip(messages, group, strict=True)],
            [p.now for p in group],
            [p.item.fingerprint for p in group],
            [p.item.body for p in group],
        ]
        async with self._raw() as conn:
            rows = await conn.fetch(GROUP_APPEND, *args)
        return {int(ordinal): int(seq) for ordinal, seq in rows}


def _drop(done: asyncio.Future[int | None]) -> None:
    if not done.cancelled():
        done.exception()  # retrieved: no "exception was never retrieved" for a gone caller


def _interrupted() -> BackendUnavailable:
    return BackendUnavailable(
        "the group commit writing this append was cancelled; it may or may not be written"
    )


def _by_chat(group: list[_Pending]) -> list[list[_Pending]]:
    """The group's appends per chat, each chat's in arrival order."""
    chats: dict[UUID, list[_Pending]] = {}
    for pending in group:
        chats.setdefault(pending.chat_id, []).append(pending)
    return list(chats.values())


def _take_group(queue: list[_Pending]) -> tuple[list[_Pending], list[_Pending]]:
    """Split off the next group: in arrival order, one append per ``(chat, agui_id)``."""
    group: list[_Pending] = []
    rest: list[_Pending] = []
    keys: set[tuple[UUID, str]] = set()
    for pending in queue:
        key = pending.key
        if len(group) >= MAX_GROUP or (key is not None and key in keys):
            rest.append(pending)
            continue
        if key is not None:
            keys.add(key)
        group.append(pending)
    return group, rest
