"""The driver seam: the required :class:`Driver` protocol and the optional capability protocols.

:class:`threadkeep.Store` holds one driver and implements the public API (validation,
cursors, idempotency checks, boundaries, runs) once, on top of the driver's primitives.
Each primitive states what must be atomic. Primitives return ``None`` for "no such live
record" and leave raising public errors to ``Store``, except where a docstring says
otherwise. A driver maps its native errors into the :mod:`threadkeep` error tree (usually
``BackendUnavailable``) in one context manager and never lets them escape.

Required: the fifteen methods of :class:`Driver`. Everything else is a small protocol a
driver implements or not; the store checks each with ``isinstance`` once, when it is built
(the zarr ``Supports*`` pattern), so a capability exists exactly when its code does:

- capabilities: :class:`StepsDriver` + :class:`RunsDriver` (``steps``), :class:`ArchiveDriver`
  (``archive``), and within it :class:`ArchivedStepsDriver`, :class:`ArchiveIndexDriver`;
- fast paths of what core otherwise derives from the required primitives:
  :class:`MessagesAfterDriver`, :class:`NestedByAguiIdDriver`, :class:`LastBoundaryDriver`,
  :class:`LastMessagesDriver`, :class:`PreviewsDriver`, :class:`BulkLoadDriver`,
  :class:`CommitRunDriver`, :class:`ArchivedRowsDriver`;
- driver extras: :class:`MigratingDriver` (a versioned schema), :class:`UserErasureDriver`
  (records of a person kept outside their chats).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable
from uuid import UUID

from ._models import Chat, Message
from ._paging import ChatFilter, MessageFilter
from ._records import Records
from ._runs import Run, Step

if TYPE_CHECKING:
    from ._content import PreparedMessage
    from ._schema_migrations import SchemaMigrations

__all__ = [
    "CAPABILITY_PROTOCOLS",
    "OPTIONAL_PROTOCOLS",
    "STORE_WRITE_PRIMITIVES",
    "WRITE_PRIMITIVES",
    "ArchiveDriver",
    "ArchiveIndexDriver",
    "ArchivedRowsDriver",
    "ArchivedStepsDriver",
    "BulkLoadDriver",
    "ChatsByThreadDriver",
    "CommitRunDriver",
    "Driver",
    "DriverSetup",
    "LastBoundaryDriver",
    "LastMessagesDriver",
    "LoadChatsDriver",
    "LoadedChat",
    "MessagesAfterDriver",
    "MigratingDriver",
    "NestedByAguiIdDriver",
    "NestedKind",
    "PreviewsDriver",
    "RunContextDriver",
    "RunsDriver",
    "StepsDriver",
    "UserErasureDriver",
    "protocol_members",
]

NestedKind = Literal["tool_call", "reasoning"]
"""Which nested list of a message a lookup searches."""


@dataclass(frozen=True)
class DriverSetup:
    """What the store hands its driver when it opens (:meth:`Driver.open`).

    Attributes:
        records: The store's row helpers (its ``message_model`` and ``chat_model``): a
            driver rebuilds every row it reads with them.
        auto_migrate: ``False``: the driver must not change its schema; a schema older
            than the code raises ``SchemaOutdated`` naming ``threadkeep migrate``.
        secret_candidate: A fresh cursor secret to persist if the store has none, or
            ``None`` when the store was given its own secret (persist nothing then).
    """

    records: Records = field(default_factory=Records)
    auto_migrate: bool = True
    secret_candidate: bytes | None = None


@runtime_checkable
class Driver(Protocol):
    """The primitives every driver implements (fifteen; everything else is optional)."""

    async def open(self, setup: DriverSetup) -> bytes | None:
        """Connect, create or migrate the schema; return the persisted cursor secret.

        Called once by ``Store.open``. With ``setup.secret_candidate`` set, return the
        store's persisted secret, storing the candidate if it has none (atomic
        insert-if-absent: concurrent openers all get the same secret); a driver without
        persistent storage returns the candidate. Return ``None`` when it is ``None``.
        """

    async def close(self) -> None:
        """Release connections. Called once by ``Store.close``; idempotent."""

    async def insert_chat(self, chat: Chat) -> Chat:
        """Insert ``chat`` unless a live chat has its identity; return the winner.

        The identity is ``(tenant_id, user_id, thread_id)`` (``chat.dedup_key``): a live
        chat of another tenant, or without one, does not hold the key.

        Atomic: under N concurrent calls for one key exactly one chat is created and every
        call returns it (no error). The new chat gets the next store-wide ``seq``. Deleted
        chats do not hold the key.

        Raises:
            Conflict: If no live chat holds the key but a stored chat (any key, deleted
                or not) has ``chat.chat_id``: it is never replaced.
        """

    async def get_chat(self, chat_id: UUID) -> Chat | None:
        """Return the chat, deleted or not, or ``None`` if it does not exist."""

    async def find_live_chat(
        self, user_id: str, thread_id: str, tenant_id: str | None = None
    ) -> Chat | None:
        """Return the live (not deleted) chat of ``(tenant_id, user_id, thread_id)``.

        ``tenant_id=None`` is a tenant of its own: it finds only a chat without a tenant.
        Return ``None`` when there is no such live chat. The store passes ``tenant_id`` as
        a keyword only when it is set.
        """

    async def update_chat(self, chat: Chat, expected_revision: int | None) -> Chat | None:
        """Write ``chat``'s descriptive fields and return the stored chat.

        When ``expected_revision`` is given, writes only if the stored ``revision`` equals
        it (compare-and-set) and returns ``None`` otherwise. The stored revision is bumped
        by every write to the chat: this one, and every ``insert_messages``,
        ``replace_message`` and ``hide_messages`` that changes one of its messages, in the
        same atomic step where the store allows (cold archiving relies on it to detect a
        chat that changed while its bundle was written).

        Writes ``name``, ``agent_id``, ``channel``, ``tenant_id``, ``team_id``, ``share``,
        ``metadata``, extra fields, ``status``, ``archive_ref``, ``deleted_at`` and
        ``updated_at``; never ``seq``, ``created_at`` or ``last_message_at`` (appends own
        those). Returns ``None`` if the chat does not exist. Clearing ``deleted_at`` while
        another live chat holds the key must raise ``Conflict``.
        """

    async def page_chats(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[Chat]:
        """Return at most ``limit`` chats matching the filter, ``seq < before_seq``, seq DESC."""

    async def purge_chat(self, chat_id: UUID) -> dict[str, int]:
        """Remove a chat and everything of it for good; return counts removed per kind.

        Keys: ``chats``, ``messages`` and, where stored, ``steps``, ``runs`` and any
        driver-specific index records (for example ``locators``).
        """

    async def insert_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        """Append a batch to a live, hot chat, all or nothing; return ``(stored, created)`` pairs.

        Returns ``None`` (writing nothing) if the chat is missing, deleted or archived.
        Each message with an ``agui_id`` already stored in the chat is not inserted: the
        stored message is returned with ``created=False``; if its fingerprint differs from
        the new one, nothing of the batch is written and ``IdempotencyConflict`` is raised
        (:func:`threadkeep.driver.resolve_batch` applies the rule). Every other message
        gets the next ``seq`` of the chat, reserved atomically (strictly increasing in
        commit order under concurrent writers; gaps allowed),
        ``created_at = message.created_at or now``, ``updated_at = now``; the chat's
        ``last_message_at`` and ``updated_at`` become ``now``. ``Store`` guarantees no two
        messages of one batch share an ``agui_id``.
        """

    async def get_message(self, message_id: UUID) -> Message | None:
        """Return the visible message (it and its chat not deleted), or ``None``."""

    async def get_message_by_agui_id(self, chat_id: UUID, agui_id: str) -> Message | None:
        """Return the visible message of the chat with this ``agui_id``, or ``None``."""

    async def replace_message(
        self, prepared: PreparedMessage, expected_revision: int, now: datetime
    ) -> Message | None:
        """Compare-and-set a message's body on its revision.

        Writes ``prepared`` over the stored message with the same ``message_id`` only if the
        stored ``revision`` equals ``expected_revision`` and the message is visible; the
        stored revision becomes ``expected_revision + 1`` and ``updated_at`` becomes
        ``now``. Returns the stored message, or ``None`` (writing nothing) otherwise.
        ``seq``, ``chat_id``, ``agui_id`` and ``created_at`` never change.
        """

    async def page_messages(
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

    async def hide_messages(self, chat_id: UUID, message_ids: Sequence[UUID], now: datetime) -> int:
        """Soft-delete those messages of the chat; return how many were visible before."""

    async def find_nested(self, kind: NestedKind, item_id: UUID) -> Message | None:
        """Return the visible message holding the tool call / reasoning with this id."""


# -- fast paths of what core derives ------------------------------------------------------


@runtime_checkable
class MessagesAfterDriver(Protocol):
    """Forward reads in one query (core otherwise walks ``page_messages`` backwards)."""

    async def messages_after(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        """Return at most ``limit`` visible messages with ``seq > after_seq``, seq ASC."""


@runtime_checkable
class NestedByAguiIdDriver(Protocol):
    """Nested lookups by ``agui_id`` in one query (core otherwise pages the chat)."""

    async def find_nested_by_agui_id(
        self, kind: NestedKind, chat_id: UUID, agui_id: str
    ) -> Message | None:
        """Return the visible message of the chat holding a tool call / reasoning by agui_id.

        When several do, the one with the highest seq.
        """


@runtime_checkable
class LastBoundaryDriver(Protocol):
    """The newest boundary in one cheap query (core otherwise pages boundaries, limit 1)."""

    async def last_boundary(self, chat_id: UUID) -> Message | None:
        """Return the visible message of kind ``boundary`` with the highest seq, or ``None``."""


@runtime_checkable
class LastMessagesDriver(Protocol):
    """Every chat's newest message in one round trip (core otherwise pages each chat)."""

    async def last_messages(self, chat_ids: Sequence[UUID]) -> dict[UUID, Message]:
        """Map each live chat of ``chat_ids`` that has a visible message to its newest one.

        An archived chat has no hot messages, so it is left out (``Store`` does not
        rehydrate for previews).
        """


@runtime_checkable
class PreviewsDriver(Protocol):
    """Chats with their newest message in one round trip (``Store.list_chat_previews``)."""

    async def page_chats_with_last(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[tuple[Chat, Message | None]]:
        """Return ``page_chats(...)``, each chat paired with its ``last_messages`` entry.

        Pairs run seq DESC, exactly the chats ``page_chats`` returns for the arguments;
        the message is the one ``last_messages([chat_id])`` would return, or ``None``
        (no visible message, a deleted or archived chat). A damaged row is rebuilt with
        ``rebuilt_each`` as in those primitives: on a skipping read a damaged chat leaves
        its pair out and a damaged message leaves ``None`` (``Store`` tells them apart by
        ``CorruptRecord.kind``).
        """


@runtime_checkable
class BulkLoadDriver(Protocol):
    """A bulk append path (for example ``COPY``) for ``Store.load_messages``."""

    async def load_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[int | None] | None:
        """Bulk-append a large batch to a live, hot chat, all or nothing.

        The contract of ``insert_messages`` (seq reservation, ``agui_id`` idempotency with
        ``IdempotencyConflict`` raised before anything is written, the chat's
        ``last_message_at``/``updated_at``/``revision``), returning instead of stored
        messages the new ``seq`` of each created message and ``None`` for each already
        stored; ``None`` overall (writing nothing) if the chat is missing, deleted or
        archived. Batches are up to ``MAX_LOAD_BATCH`` messages; ``Store`` guarantees no
        two share an ``agui_id``. Without it ``Store`` writes through ``insert_messages``.

        The messages are the caller's as given: their store-assigned fields (``chat_id``,
        ``seq``, ``revision``, ``updated_at``, ``deleted_at``) may hold anything and must
        be ignored; the row takes ``chat_id``, the new seq and ``now`` from the arguments
        (``created_at`` is the message's, or ``now`` when it has none).
        """


@dataclass(frozen=True)
class LoadedChat:
    """One new chat with its records, as ``Store.load_chats`` hands it to the driver.

    Attributes:
        chat: The chat to insert (``seq`` unset, ``revision`` 0), its metadata final.
        messages: Its messages, checked and encoded, in order, no two sharing an
            ``agui_id``; they get seqs 1, 2, ... as ``insert_messages`` would give them.
        runs: Its run records, stored as given (``revision`` included).
        steps: Its steps, new, saved as ``save_steps`` saves them (its seqs), no two
            sharing a ``step_id``.
    """

    chat: Chat
    messages: Sequence[PreparedMessage] = ()
    runs: Sequence[Run] = ()
    steps: Sequence[Step] = ()


@runtime_checkable
class ChatsByThreadDriver(Protocol):
    """Many ``find_live_chat`` lookups of one user in one read (``Store.find_chats``)."""

    async def find_live_chats(
        self, user_id: str, thread_ids: Sequence[str], tenant_id: str | None
    ) -> dict[str, Chat]:
        """Return the live chat of each of ``thread_ids`` that has one, by thread id.

        What ``find_live_chat(user_id, thread_id, tenant_id)`` returns for each id, in one
        read; ids without a live chat are left out. At most 1,000 ids per call. Without it
        core calls ``find_live_chat`` once per id.
        """


@runtime_checkable
class LoadChatsDriver(Protocol):
    """New chats with all their records in one atomic step (``Store.load_chats``)."""

    async def load_chats(self, chats: Sequence[LoadedChat], now: datetime) -> list[bool]:
        """Insert new chats, each with its messages, runs and steps, as one batch.

        For each chat whose ``(user_id, thread_id, tenant_id)`` no live chat holds, the
        chat and all its records are written (``insert_chat``, ``insert_messages`` at
        ``now``, the runs, ``save_steps``: every one of its counters and timestamps as
        those leave them); a chat whose key a live chat holds is skipped whole, nothing of
        it written. Returns ``True`` for each chat written, ``False`` for each skipped, in
        order. All of it is one atomic step: on failure nothing of the batch is written.
        Without it core writes each chat in turn with those primitives (the same result
        without concurrent writers, but not atomic).
        """


@runtime_checkable
class CommitRunDriver(Protocol):
    """A run record with its messages and steps in one atomic step (two writes per run)."""

    async def commit_run(
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
        appended to ``run.chat_id`` as ``insert_messages`` appends them (idempotent by
        ``agui_id``; ``IdempotencyConflict`` on another payload, before anything is written)
        and ``steps`` are upserted as ``save_steps`` does. Returns the stored run, the
        ``(message, created)`` pairs and the stored steps, or ``None`` (writing nothing) when
        the run check fails or the chat is not live and hot. Without it core makes the
        writes in turn: the same result without concurrent writers, but not atomic.
        """


@runtime_checkable
class RunContextDriver(Protocol):
    """What a run reads before it begins, in one round trip (``Store.run_context``)."""

    async def read_run_context(
        self, chat_id: UUID, agui_ids: Sequence[str], limit: int
    ) -> tuple[Message | None, list[Message], bool, dict[str, Message]] | None:
        """Return what a run reads before it begins, or ``None`` if the chat is not hot.

        ``(boundary, batch, more, held)``: ``last_boundary(chat_id)``; the visible
        messages with ``seq`` above that boundary's (above 0 without one), seq ASC, at most
        ``limit`` (``messages_after``); whether more may follow the batch (``False`` only
        when the batch is known to be the last); and, for each of ``agui_ids`` a visible
        message holds, that message (``get_message_by_agui_id``). ``None`` when the chat
        is missing, deleted or archived. Damaged rows are rebuilt as those primitives
        rebuild them (``rebuilt_each``). Without it core makes those calls one by one,
        after ``get_chat``.
        """


# -- capabilities -------------------------------------------------------------------------


@runtime_checkable
class StepsDriver(Protocol):
    """Steps of runs (capability ``steps``, with :class:`RunsDriver`)."""

    async def save_steps(self, steps: Sequence[Step], now: datetime) -> list[Step]:
        """Upsert steps by ``step_id``, atomically; new ones get the chat's next step seq.

        Existing steps keep ``seq`` and ``created_at``; everything else is replaced and
        ``updated_at`` becomes ``now``. Returns the stored steps in input order.
        """

    async def get_step(self, step_id: UUID) -> Step | None:
        """Return the step, or ``None``."""

    async def steps_for_run(self, chat_id: UUID, run_id: str) -> list[Step]:
        """Return the run's steps, seq ASC."""

    async def steps_for_stack(self, stack_id: str) -> list[Step]:
        """Return the steps with this ``stack_id``, seq ASC."""

    async def last_incomplete_step(self, chat_id: UUID) -> Step | None:
        """Return the highest-seq step of the chat whose status is not ``completed``."""

    async def scan_steps(self, chat_id: UUID, after_seq: int, limit: int) -> list[Step]:
        """Return at most ``limit`` steps of the chat with ``seq > after_seq``, ASC.

        A soft-deleted chat's steps are returned too (``Store.scan_steps``).
        """


@runtime_checkable
class RunsDriver(Protocol):
    """Run records with leases (capability ``steps``, with :class:`StepsDriver`)."""

    async def delete_run_records(self, chat_id: UUID, run_id: str) -> dict[str, int]:
        """Hard-delete the run's messages (by ``run_id``), steps and run record; return counts."""

    async def insert_run(self, run: Run) -> Run:
        """Insert the run unless ``(chat_id, run_id)`` exists; return the stored run."""

    async def get_run(self, chat_id: UUID, run_id: str) -> Run | None:
        """Return the run, or ``None``."""

    async def replace_run(self, run: Run, expected_revision: int) -> Run | None:
        """Compare-and-set the run on its revision (stored revision becomes expected + 1)."""

    async def expired_runs(self, now: datetime, limit: int) -> list[Run]:
        """Return at most ``limit`` active runs whose ``lease_expires_at`` is before ``now``."""


@runtime_checkable
class ArchiveDriver(Protocol):
    """Cold archiving of idle chats (capability ``archive``)."""

    async def scan_messages(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        """Return at most ``limit`` messages, hidden ones included, ``seq > after_seq``, ASC.

        A soft-deleted chat's messages are returned too (``Store.scan_messages``).
        """

    async def delete_hot_messages(self, chat_id: UUID) -> int:
        """Hard-delete every message of the chat (and its index records); return the count."""

    async def restore_messages(self, chat_id: UUID, messages: Sequence[Message]) -> int:
        """Insert messages exactly as given (ids, seq, timestamps, deleted_at, revision).

        Idempotent: messages whose ``message_id`` is already stored are skipped. Afterwards
        the chat's next seq is greater than every restored seq. Returns how many were
        inserted.
        """


@runtime_checkable
class ArchivedStepsDriver(Protocol):
    """Steps in archived bundles (a driver with both ``archive`` and ``steps`` needs it)."""

    async def delete_hot_steps(self, chat_id: UUID) -> int:
        """Hard-delete every step of the chat; return the count."""

    async def restore_steps(self, chat_id: UUID, steps: Sequence[Step]) -> int:
        """Insert steps exactly as given (ids, seq, timestamps); skip stored ``step_id``s.

        Afterwards the chat's next step seq is greater than every restored seq. Returns how
        many were inserted.
        """


@runtime_checkable
class ArchivedRowsDriver(Protocol):
    """The atomic delete cold archiving calls after flipping a chat to ``archived``."""

    async def delete_archived_rows(
        self, chat_id: UUID, expected_revision: int
    ) -> dict[str, int] | None:
        """Hard-delete the chat's messages and steps if it is archived at that revision.

        Checks ``status == archived and revision == expected_revision``, deletes messages
        (with index records) and steps, and bumps the chat's revision, all in one atomic
        step (for example one transaction holding the chat row's lock): that is what
        keeps a rehydration racing an archiver from losing rows. Returns
        ``{"messages": n, "steps": m}``, or ``None`` (deleting nothing) when the chat is not
        archived at ``expected_revision``. Without it core reads the chat and calls
        ``delete_hot_messages`` / ``delete_hot_steps``: correct without concurrent
        readers, but not atomic.
        """


@runtime_checkable
class ArchiveIndexDriver(Protocol):
    """Lookups by id that find archived chats (without it they miss them)."""

    async def index_archived_ids(self, chat_id: UUID, item_ids: Sequence[UUID]) -> int:
        """Remember that these ids (messages, tool calls, reasonings) belong to the chat.

        Cold archiving calls it before the chat's hot rows go, so that a lookup by id
        (``get_message``, ``get_tool_call``...) can find the archived chat and rehydrate it.
        Idempotent: ids already recorded are skipped. The entries outlive rehydration and
        go with ``purge_chat`` (count key ``archived_ids``). Returns how many were added.
        """

    async def archived_chat_of(self, item_id: UUID) -> UUID | None:
        """Return the chat recorded for ``item_id`` by ``index_archived_ids``, or ``None``."""


# -- driver extras ------------------------------------------------------------------------


@runtime_checkable
class MigratingDriver(Protocol):
    """A driver whose storage has a versioned schema (``threadkeep migrate``)."""

    def schema_migrations(self) -> SchemaMigrations | None:
        """Return the schema upgrades of the database; works on an unopened driver."""


@runtime_checkable
class UserErasureDriver(Protocol):
    """A driver that keeps records of a person outside their chats (``Store.erase_user``)."""

    async def erase_user_records(self, user_id: str) -> dict[str, int]:
        """Remove what the driver keeps of ``user_id`` beyond their chats; return counts.

        Called by ``Store.erase_user`` after every chat of the person is purged; the
        counts go to the receipt's ``"hot"`` entry (only kinds with a non-zero count).
        """


CAPABILITY_PROTOCOLS: dict[str, tuple[type, ...]] = {
    "steps": (StepsDriver, RunsDriver),
    "archive": (ArchiveDriver,),
}
"""The protocols a driver implements to have each optional capability."""

OPTIONAL_PROTOCOLS: tuple[type, ...] = (
    MessagesAfterDriver,
    NestedByAguiIdDriver,
    LastBoundaryDriver,
    LastMessagesDriver,
    PreviewsDriver,
    BulkLoadDriver,
    CommitRunDriver,
    RunContextDriver,
    ChatsByThreadDriver,
    LoadChatsDriver,
    StepsDriver,
    RunsDriver,
    ArchiveDriver,
    ArchivedStepsDriver,
    ArchivedRowsDriver,
    ArchiveIndexDriver,
)
"""Every optional primitive protocol, in the order the store checks them."""


def protocol_members(protocol: type) -> tuple[str, ...]:
    """Return the method names a driver protocol declares, in source order.

    Args:
        protocol: :class:`Driver` or one of the optional protocols.

    Returns:
        The names (no dunder names, no inherited ``Protocol`` machinery).
    """
    return tuple(
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and callable(value)
    )


STORE_WRITE_PRIMITIVES = (
    "insert_chat",
    "update_chat",
    "purge_chat",
    "insert_messages",
    "replace_message",
    "hide_messages",
    "delete_hot_messages",
    "restore_messages",
    "save_steps",
    "delete_hot_steps",
    "restore_steps",
    "delete_run_records",
    "insert_run",
    "replace_run",
    "commit_run",
    "load_chats",
)
"""The primitives that write records; each call is one store write (one atomic step).

``threadkeep.testing.count_store_writes`` counts these.
"""

WRITE_PRIMITIVES = frozenset(
    {
        *STORE_WRITE_PRIMITIVES,
        "load_messages",
        "delete_archived_rows",
        "index_archived_ids",
    }
)
"""Primitives that write: each runs to its end even if the calling task is cancelled.

For a driver that sets ``shield_writes`` (see :class:`threadkeep.driver.DriverBase`).
``load_messages`` (the bulk path) is one: a load cancelled mid-batch on SQLite once left
``BEGIN IMMEDIATE`` held, and the next write failed ``database is locked`` (issue 12)."""
