"""The driver SPI: the storage primitives a driver implements under :class:`threadkeep.Store`.

``Store`` implements the public API (validation, cursors, idempotency checks, boundaries,
runs) once, on top of these primitives; a driver subclasses ``Store`` and implements them.
Each primitive states what must be atomic. Primitives return ``None`` for "no such live
record" and leave raising public errors to ``Store``, except where a docstring says
otherwise. A driver maps its native errors into the :mod:`threadkeep` error tree (usually
``BackendUnavailable``) in one context manager and never lets them escape.

The primitives for steps and runs (capability ``steps``) and for cold archiving (capability
``archive``) have default implementations that raise ``CapabilityNotSupported``, so a small
driver implements only the chat and message primitives.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any, ClassVar, Literal
from uuid import UUID

from ._batch import fingerprint, resolve_batch
from ._content import PreparedMessage
from ._errors import CapabilityNotSupported
from ._models import Chat, ChatStatus, Message, MessageKind
from ._paging import ChatFilter, MessageFilter
from ._runs import Run, Step
from ._shielding import finish

__all__ = [
    "CAPABILITY_PRIMITIVES",
    "STORE_WRITE_PRIMITIVES",
    "WRITE_PRIMITIVES",
    "DriverPrimitives",
    "NestedKind",
    "check_capabilities",
    "unimplemented_primitives",
]

NestedKind = Literal["tool_call", "reasoning"]
"""Which nested list of a message a lookup searches."""

_BOUNDARIES = MessageFilter(kinds=frozenset({MessageKind.BOUNDARY}))
_ANY_MESSAGE = MessageFilter()


def _unsupported(capability: str) -> CapabilityNotSupported:
    return CapabilityNotSupported(
        f"this driver does not declare the {capability!r} capability; use a driver that does "
        "(see docs/capabilities.md)"
    )


STORE_WRITE_PRIMITIVES = (
    "_insert_chat",
    "_update_chat",
    "_purge_chat",
    "_insert_messages",
    "_replace_message",
    "_hide_messages",
    "_delete_hot_messages",
    "_restore_messages",
    "_save_steps",
    "_delete_hot_steps",
    "_restore_steps",
    "_delete_run_records",
    "_insert_run",
    "_replace_run",
    "_commit_run",
)
"""The primitives that write records; each call is one store write (one atomic step).

``threadkeep.testing.count_store_writes`` counts these.
"""

WRITE_PRIMITIVES = frozenset(
    {
        *STORE_WRITE_PRIMITIVES,
        "_load_messages",
        "_load_secret",
        "_delete_archived_rows",
        "_index_archived_ids",
    }
)
"""Primitives that write: each runs to its end even if the calling task is cancelled.

``_load_messages`` (the bulk path) is one: a load cancelled mid-batch on SQLite once left
``BEGIN IMMEDIATE`` held, and the next write failed ``database is locked`` (issue 12)."""


CAPABILITY_PRIMITIVES: dict[str, tuple[str, ...]] = {
    "steps": (
        "_save_steps",
        "_get_step",
        "_steps_for_run",
        "_steps_for_stack",
        "_last_incomplete_step",
        "_scan_steps",
        "_delete_run_records",
        "_insert_run",
        "_get_run",
        "_replace_run",
        "_expired_runs",
    ),
    "archive": ("_scan_messages", "_delete_hot_messages", "_restore_messages"),
}
"""The primitives a driver must implement to declare each optional capability.

A driver declaring both ``steps`` and ``archive`` also implements ``_delete_hot_steps`` and
``_restore_steps`` (:data:`_ARCHIVED_STEPS`). What stays optional within a capability
(``_index_archived_ids``/``_archived_chat_of``, ``_load_messages``, and the defaults that
are correct but not atomic, ``_commit_run`` and ``_delete_archived_rows``) is not listed.
"""

_ARCHIVED_STEPS = ("_delete_hot_steps", "_restore_steps")


def unimplemented_primitives(driver_class: type[DriverPrimitives]) -> list[str]:
    """Return the primitives ``driver_class`` declares (by its capabilities) but does not define.

    A primitive counts as defined when some class of the driver overrides the raising
    default of :class:`DriverPrimitives`. An empty list means every declared capability
    is backed by code: the declaration cannot drift from the implementation.

    Args:
        driver_class: A driver class (its class-level ``capabilities`` is read).

    Returns:
        The missing primitive names, in :data:`CAPABILITY_PRIMITIVES` order.
    """
    declared = getattr(driver_class, "capabilities", None)
    needed: list[str] = []
    for capability, names in CAPABILITY_PRIMITIVES.items():
        if getattr(declared, capability, False):
            needed += names
    if getattr(declared, "steps", False) and getattr(declared, "archive", False):
        needed += _ARCHIVED_STEPS
    return [
        name for name in needed if getattr(driver_class, name) is getattr(DriverPrimitives, name)
    ]


@functools.cache
def check_capabilities(driver_class: type[DriverPrimitives]) -> None:
    """Refuse a driver class whose declared capabilities lack their primitives.

    Called once per class when its first store is built (``Store.__init__``).

    Raises:
        TypeError: Naming the class and each missing primitive (as Python refuses to
            instantiate an abstract class).
    """
    missing = unimplemented_primitives(driver_class)
    if missing:
        msg = (
            f"can't instantiate driver {driver_class.__name__}: its capabilities declare "
            f"what it does not implement ({', '.join(missing)}); implement them or do not "
            "declare the capability"
        )
        raise TypeError(msg)


def _run_whole(
    primitive: Callable[..., Coroutine[Any, Any, Any]],
) -> Callable[..., Coroutine[Any, Any, Any]]:
    """Wrap a write primitive so a cancellation is delivered only after it has finished.

    A write cancelled at an arbitrary await (``asyncio.wait_for``, a client gone away) would
    otherwise leave what the driver was doing half-done: SQLite's ``BEGIN IMMEDIATE`` held
    by a connection nobody owns (every later write fails ``database is locked``), a
    transaction open, a connection checked out (issue 12). Run as a shielded task, the
    write commits or rolls back as a whole and releases everything; then the caller's
    ``CancelledError`` is raised (``asyncio.wait_for`` still times out).
    """

    @functools.wraps(primitive)
    async def whole(*args: Any, **kwargs: Any) -> Any:
        return await finish(primitive(*args, **kwargs))

    whole.__threadkeep_whole__ = True  # type: ignore[attr-defined]
    return whole


class DriverPrimitives(ABC):
    """Storage primitives; see the module docstring for the contract they share.

    A driver class that sets :attr:`shield_writes` gets every write primitive it defines
    (:data:`WRITE_PRIMITIVES`) wrapped when the class is created, so that cancelling the
    caller never interrupts it half-way: cancellation safety without writing it.
    """

    shield_writes: ClassVar[bool] = False
    """Run write primitives to completion under cancellation (see :func:`_run_whole`).

    Set it on drivers whose writes hold connections, locks or transactions across awaits
    (SQL, MongoDB); a driver whose writes finish without yielding half-way needs nothing.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.shield_writes:
            return
        for name in WRITE_PRIMITIVES & set(vars(cls)):
            function = vars(cls)[name]
            if inspect.iscoroutinefunction(function) and not hasattr(
                function, "__threadkeep_whole__"
            ):
                setattr(cls, name, _run_whole(function))

    # -- lifecycle ---------------------------------------------------------------------

    @abstractmethod
    async def _open(self) -> None:
        """Connect, create or migrate the schema. Called once by ``Store.open``."""

    @abstractmethod
    async def _close(self) -> None:
        """Release connections. Called once by ``Store.close``; must not raise."""

    @abstractmethod
    async def _load_secret(self, candidate: bytes) -> bytes:
        """Return the store's persisted cursor secret, storing ``candidate`` if it has none.

        Atomic insert-if-absent: concurrent openers all get the same secret.
        """

    # -- chats ---------------------------------------------------------------------------

    @abstractmethod
    async def _insert_chat(self, chat: Chat) -> Chat:
        """Insert ``chat`` unless a live chat has its identity; return the winner.

        The identity is ``(tenant_id, user_id, thread_id)`` (``chat.dedup_key``): a live
        chat of another tenant, or without one, does not hold the key.

        Atomic: under N concurrent calls for one key exactly one chat is created and every
        call returns it (no error). The new chat gets the next store-wide ``seq``. Deleted
        chats do not hold the key.
        """

    @abstractmethod
    async def _get_chat(self, chat_id: UUID) -> Chat | None:
        """Return the chat, deleted or not, or ``None`` if it does not exist."""

    @abstractmethod
    async def _find_live_chat(
        self, user_id: str, thread_id: str, tenant_id: str | None = None
    ) -> Chat | None:
        """Return the live (not deleted) chat of ``(tenant_id, user_id, thread_id)``.

        ``tenant_id=None`` is a tenant of its own: it finds only a chat without a tenant.
        Return ``None`` when there is no such live chat. The store passes ``tenant_id`` as
        a keyword only when it is set.
        """

    @abstractmethod
    async def _update_chat(self, chat: Chat, expected_revision: int | None) -> Chat | None:
        """Write ``chat``'s descriptive fields and return the stored chat.

        When ``expected_revision`` is given, writes only if the stored ``revision`` equals
        it (compare-and-set) and returns ``None`` otherwise. The stored revision is bumped
        by every write to the chat: this one, and every ``_insert_messages``,
        ``_replace_message`` and ``_hide_messages`` that changes one of its messages, in the
        same atomic step where the store allows (cold archiving relies on it to detect a
        chat that changed while its bundle was written).

        Writes ``name``, ``agent_id``, ``channel``, ``tenant_id``, ``team_id``, ``share``,
        ``metadata``, extra fields, ``status``, ``archive_ref``, ``deleted_at`` and
        ``updated_at``; never ``seq``, ``created_at`` or ``last_message_at`` (appends own
        those). Returns ``None`` if the chat does not exist. Clearing ``deleted_at`` while
        another live chat holds the key must raise ``Conflict``.
        """

    @abstractmethod
    async def _page_chats(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[Chat]:
        """Return at most ``limit`` chats matching the filter, ``seq < before_seq``, seq DESC."""

    @abstractmethod
    async def _purge_chat(self, chat_id: UUID) -> dict[str, int]:
        """Remove a chat and everything of it for good; return counts removed per kind.

        Keys: ``chats``, ``messages`` and, where stored, ``steps``, ``runs`` and any
        driver-specific index records (for example ``locators``).
        """

    # -- messages ------------------------------------------------------------------------

    @abstractmethod
    async def _insert_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        """Append a batch to a live, hot chat, all or nothing; return ``(stored, created)`` pairs.

        Returns ``None`` (writing nothing) if the chat is missing, deleted or archived.
        Each message with an ``agui_id`` already stored in the chat is not inserted: the
        stored message is returned with ``created=False``; if its fingerprint differs from
        the new one, nothing of the batch is written and ``IdempotencyConflict`` is raised.
        Every other message gets the next ``seq`` of the chat, reserved atomically (strictly
        increasing in commit order under concurrent writers; gaps allowed),
        ``created_at = message.created_at or now``, ``updated_at = now``; the chat's
        ``last_message_at`` and ``updated_at`` become ``now``. ``Store`` guarantees no two
        messages of one batch share an ``agui_id``.
        """

    async def _load_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[int | None] | None:
        """Bulk-append a large batch to a live, hot chat, all or nothing (``Store.load_messages``).

        The contract of ``_insert_messages`` (seq reservation, ``agui_id`` idempotency with
        ``IdempotencyConflict`` raised before anything is written, the chat's
        ``last_message_at``/``updated_at``/``revision``), on the driver's bulk path (for
        example ``COPY``), returning instead of stored messages the new ``seq`` of each
        created message and ``None`` for each already stored; ``None`` overall (writing
        nothing) if the chat is missing, deleted or archived. Batches are up to
        ``MAX_LOAD_BATCH`` messages; ``Store`` guarantees no two share an ``agui_id``.

        Optional: this default raises ``CapabilityNotSupported`` and ``Store`` then writes
        the batch through ``_insert_messages``.
        """
        raise _unsupported("bulk load")

    @abstractmethod
    async def _get_message(self, message_id: UUID) -> Message | None:
        """Return the visible message (it and its chat not deleted), or ``None``."""

    @abstractmethod
    async def _get_message_by_agui_id(self, chat_id: UUID, agui_id: str) -> Message | None:
        """Return the visible message of the chat with this ``agui_id``, or ``None``."""

    @abstractmethod
    async def _replace_message(
        self, prepared: PreparedMessage, expected_revision: int, now: datetime
    ) -> Message | None:
        """Compare-and-set a message's body on its revision.

        Writes ``prepared`` over the stored message with the same ``message_id`` only if the
        stored ``revision`` equals ``expected_revision`` and the message is visible; the
        stored revision becomes ``expected_revision + 1`` and ``updated_at`` becomes
        ``now``. Returns the stored message, or ``None`` (writing nothing) otherwise.
        ``seq``, ``chat_id``, ``agui_id`` and ``created_at`` never change.
        """

    @abstractmethod
    async def _page_messages(
        self,
        chat_id: UUID,
        message_filter: MessageFilter,
        before_seq: int | None,
        limit: int,
    ) -> list[Message] | None:
        """Return at most ``limit`` visible messages, ``seq < before_seq``, seq DESC.

        Returns ``None`` if the chat is missing, deleted or archived (so one round trip
        serves the common case and ``Store`` looks at the chat only on ``None``).
        """

    @abstractmethod
    async def _messages_after(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        """Return at most ``limit`` visible messages with ``seq > after_seq``, seq ASC."""

    async def _last_boundary(self, chat_id: UUID) -> Message | None:
        """Return the visible message of kind ``boundary`` with the highest seq, or ``None``.

        Derived: this default is one ``_page_messages`` of limit 1 on boundaries; a driver
        overrides it only for a cheaper query.
        """
        page = await self._page_messages(chat_id, _BOUNDARIES, None, 1)
        return page[0] if page else None

    async def _last_messages(self, chat_ids: Sequence[UUID]) -> dict[UUID, Message]:
        """Map each live chat of ``chat_ids`` that has a visible message to its newest one.

        An archived chat has no hot messages, so it is left out (``Store`` does not
        rehydrate for previews).

        Derived: this default is one ``_page_messages`` of limit 1 per chat; a driver
        overrides it to read every chat's newest message in one round trip.
        """
        found: dict[UUID, Message] = {}
        for chat_id in chat_ids:
            page = await self._page_messages(chat_id, _ANY_MESSAGE, None, 1)
            if page:
                found[chat_id] = page[0]
        return found

    async def _page_chats_with_last(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[tuple[Chat, Message | None]]:
        """Return ``_page_chats(...)``, each chat paired with its ``_last_messages`` entry.

        Pairs run seq DESC, exactly the chats ``_page_chats`` returns for the arguments;
        the message is the one ``_last_messages([chat_id])`` would return, or ``None``
        (no visible message, a deleted or archived chat). A damaged row is rebuilt with
        ``rebuilt_each`` as in those primitives: on a skipping read a damaged chat leaves
        its pair out and a damaged message leaves ``None`` (``Store`` tells them apart by
        ``CorruptRecord.kind``).

        Optional (``Store.list_chat_previews``): this default makes the two calls; a driver
        overrides it to answer in one round trip (a ``LATERAL`` join).
        """
        chats = await self._page_chats(chat_filter, before_seq, limit)
        hot = [c.chat_id for c in chats if c.deleted_at is None and c.status is ChatStatus.ACTIVE]
        newest = await self._last_messages(hot) if hot else {}
        return [(chat, newest.get(chat.chat_id)) for chat in chats]

    @abstractmethod
    async def _hide_messages(
        self, chat_id: UUID, message_ids: Sequence[UUID], now: datetime
    ) -> int:
        """Soft-delete those messages of the chat; return how many were visible before."""

    @abstractmethod
    async def _find_nested(self, kind: NestedKind, item_id: UUID) -> Message | None:
        """Return the visible message holding the tool call / reasoning with this id."""

    @abstractmethod
    async def _find_nested_by_agui_id(
        self, kind: NestedKind, chat_id: UUID, agui_id: str
    ) -> Message | None:
        """Return the visible message of the chat holding a tool call / reasoning by agui_id.

        When several do, the one with the highest seq.
        """

    # -- archive support (capability "archive") ------------------------------------------

    async def _scan_messages(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        """Return at most ``limit`` messages, hidden ones included, ``seq > after_seq``, ASC.

        A soft-deleted chat's messages are returned too (``Store.scan_messages``).
        """
        raise _unsupported("archive")

    async def _delete_hot_messages(self, chat_id: UUID) -> int:
        """Hard-delete every message of the chat (and its index records); return the count."""
        raise _unsupported("archive")

    async def _delete_archived_rows(
        self, chat_id: UUID, expected_revision: int
    ) -> dict[str, int] | None:
        """Hard-delete the chat's messages and steps if it is archived at that revision.

        What cold archiving calls after flipping a chat to ``archived``. A driver should
        override it to check ``status == archived and revision == expected_revision``,
        delete messages (with index records) and steps, and bump the chat's revision, all
        in one atomic step (for example one transaction holding the chat row's lock):
        that is what keeps a rehydration racing an archiver from losing rows. Returns
        ``{"messages": n, "steps": m}``, or ``None`` (deleting nothing) when the chat is not
        archived at ``expected_revision``.

        This default reads the chat, then calls ``_delete_hot_messages`` and
        ``_delete_hot_steps``: correct without concurrent readers, but not atomic.
        """
        chat = await self._get_chat(chat_id)
        if chat is None or chat.status is not ChatStatus.ARCHIVED:
            return None
        if chat.revision != expected_revision:
            return None
        counts = {"messages": await self._delete_hot_messages(chat_id), "steps": 0}
        with contextlib.suppress(CapabilityNotSupported):
            counts["steps"] = await self._delete_hot_steps(chat_id)
        return counts

    async def _index_archived_ids(self, chat_id: UUID, item_ids: Sequence[UUID]) -> int:
        """Remember that these ids (messages, tool calls, reasonings) belong to the chat.

        Cold archiving calls it before the chat's hot rows go, so that a lookup by id
        (``get_message``, ``get_tool_call``...) can find the archived chat and rehydrate it.
        Idempotent: ids already recorded are skipped. The entries outlive rehydration and
        go with ``_purge_chat`` (count key ``archived_ids``). Returns how many were added.
        Optional within ``archive``: without it, lookups by id miss archived chats.
        """
        raise _unsupported("archive")

    async def _archived_chat_of(self, item_id: UUID) -> UUID | None:
        """Return the chat recorded for ``item_id`` by ``_index_archived_ids``, or ``None``."""
        raise _unsupported("archive")

    async def _restore_messages(self, chat_id: UUID, messages: Sequence[Message]) -> int:
        """Insert messages exactly as given (ids, seq, timestamps, deleted_at, revision).

        Idempotent: messages whose ``message_id`` is already stored are skipped. Afterwards
        the chat's next seq is greater than every restored seq. Returns how many were
        inserted.
        """
        raise _unsupported("archive")

    async def _delete_hot_steps(self, chat_id: UUID) -> int:
        """Hard-delete every step of the chat; return the count (archive + steps)."""
        raise _unsupported("archive")

    async def _restore_steps(self, chat_id: UUID, steps: Sequence[Step]) -> int:
        """Insert steps exactly as given (ids, seq, timestamps); skip stored ``step_id``s.

        Afterwards the chat's next step seq is greater than every restored seq. Returns how
        many were inserted (archive + steps).
        """
        raise _unsupported("archive")

    # -- steps and runs (capability "steps") ---------------------------------------------

    async def _save_steps(self, steps: Sequence[Step], now: datetime) -> list[Step]:
        """Upsert steps by ``step_id``, atomically; new ones get the chat's next step seq.

        Existing steps keep ``seq`` and ``created_at``; everything else is replaced and
        ``updated_at`` becomes ``now``. Returns the stored steps in input order.
        """
        raise _unsupported("steps")

    async def _get_step(self, step_id: UUID) -> Step | None:
        """Return the step, or ``None``."""
        raise _unsupported("steps")

    async def _steps_for_run(self, chat_id: UUID, run_id: str) -> list[Step]:
        """Return the run's steps, seq ASC."""
        raise _unsupported("steps")

    async def _steps_for_stack(self, stack_id: str) -> list[Step]:
        """Return the steps with this ``stack_id``, seq ASC."""
        raise _unsupported("steps")

    async def _last_incomplete_step(self, chat_id: UUID) -> Step | None:
        """Return the highest-seq step of the chat whose status is not ``completed``."""
        raise _unsupported("steps")

    async def _scan_steps(self, chat_id: UUID, after_seq: int, limit: int) -> list[Step]:
        """Return at most ``limit`` steps of the chat with ``seq > after_seq``, ASC.

        A soft-deleted chat's steps are returned too (``Store.scan_steps``).
        """
        raise _unsupported("steps")

    async def _delete_run_records(self, chat_id: UUID, run_id: str) -> dict[str, int]:
        """Hard-delete the run's messages (by ``run_id``), steps and run record; return counts."""
        raise _unsupported("steps")

    async def _insert_run(self, run: Run) -> Run:
        """Insert the run unless ``(chat_id, run_id)`` exists; return the stored run."""
        raise _unsupported("steps")

    async def _get_run(self, chat_id: UUID, run_id: str) -> Run | None:
        """Return the run, or ``None``."""
        raise _unsupported("steps")

    async def _replace_run(self, run: Run, expected_revision: int) -> Run | None:
        """Compare-and-set the run on its revision (stored revision becomes expected + 1)."""
        raise _unsupported("steps")

    async def _expired_runs(self, now: datetime, limit: int) -> list[Run]:
        """Return at most ``limit`` active runs whose ``lease_expires_at`` is before ``now``."""
        raise _unsupported("steps")

    async def _commit_run(
        self,
        run: Run,
        expected_revision: int | None,
        messages: Sequence[PreparedMessage],
        steps: Sequence[Step],
        now: datetime,
    ) -> tuple[Run, list[tuple[Message, bool]], list[Step]] | None:
        """Write a run record with messages and steps of its chat as one batch.

        What ``Store.begin_run`` (the run's input) and ``Store.end_run`` (a buffered run's
        records) call. With ``expected_revision=None`` the run is inserted and must not
        exist; otherwise it replaces the stored run only if the stored ``revision`` equals
        ``expected_revision`` (it becomes ``expected_revision + 1``). ``messages`` are
        appended to ``run.chat_id`` as ``_insert_messages`` appends them (idempotent by
        ``agui_id``; ``IdempotencyConflict`` on another payload, before anything is written)
        and ``steps`` are upserted as ``_save_steps`` does. Returns the stored run, the
        ``(message, created)`` pairs and the stored steps, or ``None`` (writing nothing) when
        the run check fails or the chat is not live and hot.

        A driver should override it to do all of it in one atomic step (one transaction):
        then a buffered run is exactly two store writes and a crash never leaves half a
        batch. This default checks the messages' ``agui_id`` s first (so an
        ``IdempotencyConflict`` writes nothing), then calls ``_insert_run``/``_replace_run``,
        ``_insert_messages`` and ``_save_steps`` in turn: the same result without concurrent
        writers, but not atomic, and several writes.
        """
        held: dict[str, tuple[str, Message]] = {}
        for item in messages:
            agui_id = item.message.agui_id
            found = await self._get_message_by_agui_id(run.chat_id, agui_id) if agui_id else None
            if agui_id is not None and found is not None:
                held[agui_id] = (fingerprint(found), found)
        resolve_batch(run.chat_id, messages, held.get)
        if expected_revision is None:
            if await self._get_run(run.chat_id, run.run_id) is not None:
                return None
            stored = await self._insert_run(run)
            if (stored.owner, stored.created_at) != (run.owner, run.created_at):
                return None
        else:
            replaced = await self._replace_run(run, expected_revision)
            if replaced is None:
                return None
            stored = replaced
        results: list[tuple[Message, bool]] = []
        if messages:
            inserted = await self._insert_messages(run.chat_id, messages, now)
            if inserted is None:
                return None
            results = inserted
        saved = await self._save_steps(steps, now) if steps else []
        return stored, results, saved

    async def _read_run_context(
        self, chat_id: UUID, agui_ids: Sequence[str], limit: int
    ) -> tuple[Message | None, list[Message], bool, dict[str, Message]] | None:
        """Return what a run reads before it begins, or ``None`` if the chat is not hot.

        ``(boundary, batch, more, held)``: ``_last_boundary(chat_id)``; the visible
        messages with ``seq`` above that boundary's (above 0 without one), seq ASC, at most
        ``limit`` (``_messages_after``); whether more may follow the batch (``False`` only
        when the batch is known to be the last); and, for each of ``agui_ids`` a visible
        message holds, that message (``_get_message_by_agui_id``). ``None`` when the chat
        is missing, deleted or archived. Damaged rows are rebuilt as those primitives
        rebuild them (``rebuilt_each``).

        Optional (``Store.run_context``, what ``StorageAgent`` reads at a run's start):
        this default makes those calls one by one, after ``_get_chat``; a driver overrides
        it to answer in one round trip.
        """
        chat = await self._get_chat(chat_id)
        if chat is None or chat.deleted_at is not None or chat.status is not ChatStatus.ACTIVE:
            return None
        boundary = await self._last_boundary(chat_id)
        after = 0 if boundary is None or boundary.seq is None else boundary.seq
        batch = await self._messages_after(chat_id, after, limit)
        held: dict[str, Message] = {}
        for agui_id in dict.fromkeys(agui_ids):
            found = await self._get_message_by_agui_id(chat_id, agui_id)
            if found is not None:
                held[agui_id] = found
        return boundary, batch, bool(batch), held
