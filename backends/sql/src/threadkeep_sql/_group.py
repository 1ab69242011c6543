"""Group commit (PostgreSQL): appends of concurrent callers share one statement and one commit.

A store with many concurrent writers (runs of different users, each appending a message or a
turn at a time) pays one statement, one commit and one WAL flush per append, and the client
one round trip (a ``send`` that wakes a server process, a ``recv``) per append.
:class:`GroupCommitter` coalesces them, whatever their chats:

- **Flush policy.** An append (a *call*: one message, or a batch of up to
  :data:`MAX_CALL_MESSAGES`) is sent at once, as the plain one-statement append of
  :mod:`threadkeep_sql._pg_append`, when the committer is idle (no statement in flight and
  none just returned): a lone writer waits for no loop iteration. Calls that arrive while a
  statement is in flight queue. When a statement returns, the queue goes out as one group at
  the end of the next loop iteration: the callers that statement woke run in that iteration
  and most append again at once, so they join the group instead of the first of them going
  alone and the rest after it (which halves the group and doubles the round trips:
  measured, ``bench/README.md``). A group holds up to :data:`MAX_GROUP_MESSAGES` messages,
  oldest calls first (FIFO, so no caller is overtaken for long); a group of one call is sent
  as the plain append.
- **A second statement in flight, for large groups only** (:data:`MAX_INFLIGHT`,
  :data:`PIPELINE_MESSAGES`). While one statement is in flight, a queued group goes beside it
  only when it holds at least :data:`PIPELINE_MESSAGES` messages; a smaller one waits and
  joins the callers the statement in flight wakes. A queue of twice that or more found with
  nothing in flight goes as two groups at once, split by chat into halves. The writers then
  form two cohorts: while one cohort's statement runs on the server, the other's callers
  run their Python (and the server has two statements to spread over its cores), where one
  statement in flight makes every writer wait for one large group and then all run their
  Python at once. Small groups (a few writers, one message each) stay one cohort: a
  second statement of a few rows costs more client CPU per message than it overlaps.
- **Order within a chat.** A chat is in at most one statement in flight: a call whose
  chat a statement in flight writes waits (with every later call of its chat) for a group
  after it, so a chat's calls get seqs in arrival order even with two statements in flight
  (two statements sharing a chat could commit in either order). The same holds for a call
  left out of a group (full, or one of its ``agui_id`` values taken in it): the later calls
  of its chat wait with it. Within a group a chat's calls get seqs in arrival order
  (:mod:`threadkeep_sql._group_sql`, the statement).
- **Outcomes are per call, matched by key** (the call's number in the group), never by the
  order rows come back: a call gets its first seq (its messages got consecutive seqs, in
  order), or ``None`` (nothing of it written: the chat is not hot, or one of its
  ``agui_id`` values are stored; the caller sorts that out exactly as after a lone append).
- **All or nothing per call, isolation between callers.** Two calls that share a
  ``(chat_id, agui_id)`` are never in one group nor in two statements in flight at once (the
  later waits, and is then a retry). If a group statement fails and the server said why
  (a ``message_id`` taken, a value the database refuses, a deadlock, a unique key another
  process took meanwhile), nothing of it was written, and each call is retried alone (in
  arrival order within each chat), so each caller gets its own result or its own error; an
  ``IdempotencyConflict`` or a content error is one caller's and never reaches the group
  (the first is decided by the caller on ``None``, the second before the call is queued).
  If the connection failed without the server's answer (the group may have committed),
  every call of the group gets its own ``BackendUnavailable``: retrying would write twice.
- **Cancellation.** A store caller (``append(..., whole=True)``, what the driver's
  ``insert_messages`` uses) cancelled while its call is queued or in flight has its call
  written with its group (whole, as any write: issue 12) and then gets its
  ``CancelledError``; no other caller is touched, and no task is spent on it (the outcome is
  waited for on the call's own future). Called directly (``whole=False``), a cancelled
  :meth:`GroupCommitter.append` still queued is taken out of the queue (nothing written);
  once sent, its outcome is dropped. A statement is never cancelled by a caller: it runs in
  a task of its own.
- :meth:`GroupCommitter.close` waits until every call in flight or queued has its outcome;
  a call that a cancelled group task leaves without an outcome gets ``BackendUnavailable``
  (it may or may not be written), so no caller waits forever.

The statements go through ``Database.runner(write=True)``: on PostgreSQL the pooled asyncpg
connection in ``AUTOCOMMIT`` (one round trip per group), behind a transaction pooler a
transaction of its own; with a read replica each group is noted for read-your-writes like
any write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg  # type: ignore[import-untyped]

from threadkeep import BackendUnavailable, PreparedMessage

from ._errors import _chain
from ._group_sql import group_statement
from ._runner import Runner

__all__ = [
    "MAX_CALL_MESSAGES",
    "MAX_GROUP_MESSAGES",
    "MAX_INFLIGHT",
    "PIPELINE_MESSAGES",
    "GroupCommitter",
]

MAX_GROUP_MESSAGES = 512
"""Messages written by one group statement at most (a count; one call larger than this
still goes, alone)."""

MAX_CALL_MESSAGES = 64
"""Calls of more messages than this bypass the committer (one statement of their own)."""

MAX_INFLIGHT = 2
"""Statements (lone calls or groups) of one store in flight at once. The second only for a
group of :data:`PIPELINE_MESSAGES` or more (see the module docstring)."""

PIPELINE_MESSAGES = 64
"""Messages a group needs to go while another statement is in flight (a count); a queue of
twice this found with nothing in flight goes as two groups at once. Below it the writers
stay one group per round trip (``bench/README.md``, "Group commit": measured)."""

Lone = Callable[[UUID, Sequence[PreparedMessage], datetime], Awaitable["int | None"]]
Runners = Callable[[], AbstractAsyncContextManager[Runner]]


_PENDING: Any = object()


class _Call:
    """One caller's append: its rows, and its outcome once known.

    The outcome is kept on the call and ``done`` only wakes the caller, so a caller whose
    wait is cancelled can wait again on a fresh future without losing it (``outcome``).
    """

    __slots__ = ("chat_id", "done", "error", "items", "keys", "now", "result")

    def __init__(self, chat_id: UUID, items: Sequence[PreparedMessage], now: datetime) -> None:
        self.chat_id = chat_id
        self.items = items
        self.now = now
        self.keys = _keys(chat_id, items)
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.result: int | None = _PENDING
        self.error: BaseException | None = None

    @property
    def finished(self) -> bool:
        return self.result is not _PENDING or self.error is not None

    def settle(self, result: int | None) -> None:
        if not self.finished:
            self.result = result
            self._wake()

    def fail(self, exc: BaseException) -> None:
        if not self.finished:
            self.error = exc
            self._wake()

    def _wake(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def get(self) -> int | None:
        if self.error is not None:
            raise self.error
        return self.result

    async def outcome(self) -> tuple[int | None, bool]:
        """Wait for the outcome even if the caller is cancelled meanwhile.

        Returns:
            ``(first seq or None, cancelled)``; ``cancelled`` when the caller was cancelled
            while it waited (it must deliver the cancellation itself).

        Raises:
            ThreadkeepError: The call's own error.
        """
        cancelled = False
        while not self.finished:
            try:
                await self.done
            except asyncio.CancelledError:
                cancelled = True
                if not self.finished:  # the wait was cancelled, not the call: wait again
                    self.done = asyncio.get_running_loop().create_future()
        return self.get(), cancelled


def _keys(chat_id: UUID, items: Sequence[PreparedMessage]) -> frozenset[tuple[UUID, str]]:
    return frozenset(
        (chat_id, item.message.agui_id) for item in items if item.message.agui_id is not None
    )


class GroupCommitter:
    """Coalesces concurrent appends into group statements (see the module docstring).

    Args:
        lone: Appends one call alone (``append_one`` for one message, ``append_batch`` for
            more, a unique violation of a batch returned as ``None``); returns the first seq
            or ``None``. Also what every call of a failed group is retried with.
        runner: ``Database.runner`` for writes: returns an async context manager giving a
            :class:`~threadkeep_sql._runner.Runner` for one self-atomic write statement
            (native errors mapped, the write noted for read-your-writes).
    """

    def __init__(self, lone: Lone, runner: Runners) -> None:
        self._lone = lone
        self._runner = runner
        self._inflight = 0
        self._queue: list[_Call] = []
        self._queued = 0  # messages in the queue
        self._busy: set[UUID] = set()  # chats a statement in flight writes
        self._drainers: set[asyncio.Task[None]] = set()
        self._flush_soon: asyncio.Handle | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    async def append(
        self,
        chat_id: UUID,
        items: Sequence[PreparedMessage],
        now: datetime,
        *,
        whole: bool = False,
    ) -> int | None:
        """Append one call (its messages in order, all or nothing); return its first seq.

        Args:
            chat_id: The chat.
            items: One to :data:`MAX_CALL_MESSAGES` prepared messages, ``agui_id`` values
                unique among them (``Store.append_messages`` dedupes a batch first).
            now: The write's timestamp (``updated_at``, ``created_at`` when not given).
            whole: Run to completion under cancellation: a caller cancelled while its
                call is queued or in flight gets its ``CancelledError`` only once the call
                has its outcome (written or not, whole), as a store write must (issue 12).
                Without it, a cancelled call still queued is taken out (nothing written).

        Returns:
            The seq of the first message (the others follow it), or ``None`` when nothing
            was written: the chat is not hot, or one of the ``agui_id`` values are stored in
            the chat already (what ``append_one`` / ``append_batch`` return).

        Raises:
            ThreadkeepError: This call's own error (``Conflict``, ``InvalidArgument``,
                ``BackendUnavailable``...), never another caller's.
            asyncio.CancelledError: If the caller was cancelled (with ``whole``, after the
                call's outcome).
        """
        call = _Call(chat_id, items, now)
        self._queue.append(call)
        self._queued += len(items)
        self._idle.clear()
        if self._flush_soon is None:
            if not self._inflight:
                self._flush()  # idle: send at once, nothing waits for a loop iteration
            elif self._queued >= PIPELINE_MESSAGES and self._inflight < MAX_INFLIGHT:
                self._send_soon()  # large enough to go beside the one in flight
        if whole:
            result, cancelled = await call.outcome()
            if cancelled:
                raise asyncio.CancelledError
            return result
        try:
            await call.done  # a cancelled caller cancels it: nothing else awaits it
        except asyncio.CancelledError:
            if call in self._queue:  # not sent yet: nothing written, others untouched
                self._queue.remove(call)
                self._queued -= len(call.items)
                self._settle()
            raise
        return call.get()

    async def close(self) -> None:
        """Wait until every call in flight or queued has its outcome (before the pool closes).

        Calls that arrive while it waits are waited for too.
        """
        while not self._idle.is_set() or self._drainers:
            await self._idle.wait()
            if self._drainers:
                await asyncio.gather(*self._drainers, return_exceptions=True)

    def _settle(self) -> None:
        if not self._inflight and not self._queue:
            self._idle.set()

    def _send_soon(self) -> None:
        """Flush at the end of the next loop iteration (once, however many ask)."""
        if self._flush_soon is None:
            self._flush_soon = asyncio.get_running_loop().call_soon(self._arrived)

    def _arrived(self) -> None:
        """The end of the loop iteration in which calls arrived: send them."""
        self._flush_soon = None
        self._flush()

    def _flush(self) -> None:
        """Send queued calls as groups, as the flush policy allows (module docstring)."""
        if self._flush_soon is not None:  # called at once (a group finished): no second run
            self._flush_soon.cancel()
            self._flush_soon = None
        while self._queue and self._inflight < MAX_INFLIGHT:
            queue = self._queue
            if len(queue) == 1 and not self._inflight:
                group, self._queue = queue, []  # the common case: one call, sent at once
            else:
                group = self._next_group()
                if not group:  # too small to go beside the one in flight, or chats busy
                    break
            self._start(group)
        self._settle()

    def _next_group(self) -> list[_Call]:
        """Take the next group off the queue (empty: nothing may go now)."""
        exclude = self._busy
        if not self._inflight and MAX_INFLIGHT > 1 and self._queued >= 2 * PIPELINE_MESSAGES:
            exclude = exclude | _second_half(self._queue)  # two halves, both sent now
        group, rest, size = _take_group(self._queue, exclude)
        if self._inflight and size < PIPELINE_MESSAGES:
            return []  # it waits, and joins the callers the statement in flight wakes
        self._queue = rest
        return group

    def _start(self, group: list[_Call]) -> None:
        self._inflight += 1
        for call in group:
            self._queued -= len(call.items)
            self._busy.add(call.chat_id)
        task = asyncio.get_running_loop().create_task(self._drain(group))
        self._drainers.add(task)
        task.add_done_callback(self._drainers.discard)

    async def _drain(self, group: list[_Call]) -> None:
        try:
            await self._write(group)
        finally:
            for call in group:  # cancelled mid-way: no caller may wait forever
                if not call.finished:
                    call.fail(_interrupted())
                self._busy.discard(call.chat_id)
            self._inflight -= 1
            # The callers this statement woke run in the next loop iteration, and most
            # append again at once: send the queue at the end of that iteration, so they
            # join it instead of the first of them going alone (and the rest after it).
            self._send_soon()

    async def _write(self, group: list[_Call]) -> None:
        if len(group) == 1:
            await self._alone(group[0])
            return
        try:
            firsts = await self._write_group(group)
        except Exception as exc:  # noqa: BLE001 - isolate: each call gets its own outcome
            if not _refused_by_server(exc):
                for call in group:  # it may have committed: a retry could write it twice
                    call.fail(_unknown_outcome(exc))
                return
            await asyncio.gather(*(self._in_order(calls) for calls in _by_chat(group)))
            return
        for index, call in enumerate(group):
            call.settle(firsts.get(index))

    async def _in_order(self, calls: list[_Call]) -> None:
        for call in calls:  # one chat's calls, in arrival order
            await self._alone(call)

    async def _alone(self, call: _Call) -> None:
        try:
            result = await self._lone(call.chat_id, call.items, call.now)
        except Exception as exc:  # noqa: BLE001 - handed to its own caller
            call.fail(exc)
            return
        call.settle(result)

    async def _write_group(self, group: list[_Call]) -> dict[int, int]:
        stmt, params = group_statement(group)
        async with self._runner() as run:
            rows = await run.all(stmt, params)
        return {int(index): int(first) for index, first in rows}


def _refused_by_server(exc: BaseException) -> bool:
    """Whether the server answered ``exc`` (the statement failed: nothing was written)."""
    return any(isinstance(item, asyncpg.PostgresError) for item in _chain(exc))


def _interrupted() -> BackendUnavailable:
    return BackendUnavailable(
        "the group commit writing this append was cancelled; it may or may not be written"
    )


def _unknown_outcome(exc: Exception) -> BackendUnavailable:
    error = BackendUnavailable(
        f"the connection failed while this append was written with others ({exc}); it may "
        "or may not be written: read before retrying an append without agui_id"
    )
    error.__cause__ = exc
    return error


def _by_chat(group: list[_Call]) -> list[list[_Call]]:
    """The group's calls per chat, each chat's in arrival order."""
    chats: dict[UUID, list[_Call]] = {}
    for call in group:
        chats.setdefault(call.chat_id, []).append(call)
    return list(chats.values())


def _second_half(queue: list[_Call]) -> set[UUID]:
    """The chats of the second of two groups: whole chats, about half the queue's messages.

    Chats are taken in the order they first appear in the queue; the first half gets chats
    until it holds half the messages. Empty when one chat holds the first half (no split).
    """
    sizes: dict[UUID, int] = {}
    for call in queue:
        sizes[call.chat_id] = sizes.get(call.chat_id, 0) + len(call.items)
    half = sum(sizes.values()) / 2
    taken = 0
    second: set[UUID] = set()
    for chat_id, size in sizes.items():
        if taken >= half:
            second.add(chat_id)
        taken += size
    return second


def _take_group(queue: list[_Call], busy: set[UUID]) -> tuple[list[_Call], list[_Call], int]:
    """Split off the next group: in arrival order, each chat's calls in order.

    A call waits (stays in the rest) when its chat is in ``busy`` (a statement in flight
    writes it, or it is left for another group), when one of its keys is in the group
    already, or when it would take the group past :data:`MAX_GROUP_MESSAGES`; every later
    call of its chat then waits too, so no call overtakes an earlier one of its chat.

    Returns:
        ``(group, rest, messages in the group)``.
    """
    group: list[_Call] = []
    rest: list[_Call] = []
    taken: set[tuple[UUID, str]] = set()
    held: set[UUID] = set()
    size = 0
    for call in queue:
        chat_id = call.chat_id
        full = group and size + len(call.items) > MAX_GROUP_MESSAGES
        if full or chat_id in busy or chat_id in held or not call.keys.isdisjoint(taken):
            held.add(chat_id)
            rest.append(call)
            continue
        taken |= call.keys
        size += len(call.items)
        group.append(call)
    return group, rest, size
