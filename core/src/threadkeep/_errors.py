"""The threadkeep exception tree.

Every error a store, driver or service raises is one of these; drivers map native errors
(asyncpg, aiosqlite, pymongo, botocore) into the most specific class and chain the original
with ``raise ... from exc``, so callers never need to import a driver's exceptions::

    ThreadkeepError
    ├── NotFound
    │   ├── ChatNotFound
    │   ├── MessageNotFound          (messages, nested tool calls and reasonings)
    │   ├── StepNotFound
    │   └── RunNotFound
    ├── InvalidArgument              (also a ValueError)
    │   ├── InvalidCursor
    │   ├── InvalidContent
    │   └── PayloadTooLarge
    ├── Conflict
    │   └── IdempotencyConflict
    ├── BackendUnavailable
    │   ├── StorageFull              (disk, quota or size limit full)
    │   ├── StorageReadOnly          (the storage refuses writes)
    │   └── StorageDamaged           (the database's own files or pages are damaged)
    ├── CorruptRecord                (a stored row no longer reads as a record)
    ├── ArchiveError
    │   └── ArchiveIntegrityError
    ├── UnknownDriver
    ├── CapabilityNotSupported
    └── SchemaOutdated               (the stored schema is not at this code's revision)

Each message says what was wrong and what to do about it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ArchiveError",
    "ArchiveIntegrityError",
    "BackendUnavailable",
    "CapabilityNotSupported",
    "ChatNotFound",
    "Conflict",
    "CorruptRecord",
    "IdempotencyConflict",
    "InvalidArgument",
    "InvalidContent",
    "InvalidCursor",
    "MessageNotFound",
    "NotFound",
    "PayloadTooLarge",
    "RunNotFound",
    "SchemaOutdated",
    "StepNotFound",
    "StorageDamaged",
    "StorageFull",
    "StorageReadOnly",
    "ThreadkeepError",
    "UnknownDriver",
]


class ThreadkeepError(Exception):
    """Base class of every error threadkeep raises."""


class NotFound(ThreadkeepError):
    """A record does not exist, or is hidden (soft-deleted, or its chat is)."""


class ChatNotFound(NotFound):
    """No live chat has the given id (unknown, soft-deleted or purged)."""


class MessageNotFound(NotFound):
    """No visible message, tool call or reasoning has the given id."""


class StepNotFound(NotFound):
    """No step has the given id."""


class RunNotFound(NotFound):
    """No run has the given (chat, run) key."""


class InvalidArgument(ThreadkeepError, ValueError):
    """An argument is out of range or malformed (for example ``limit=0``)."""


class InvalidCursor(InvalidArgument):
    """A cursor was not issued by this store for this query, or was altered.

    Cursors are bound to the chat/filter they page and signed with the store's secret; a
    cursor from another chat, another filter, another store secret, or with any byte changed
    raises this. Start again from the first page (``cursor=None``).
    """


class InvalidContent(InvalidArgument):
    """Content cannot be stored exactly, for example a lone UTF-16 surrogate.

    Replace the offending characters (the stream layer uses U+FFFD) and write again.
    """


class PayloadTooLarge(InvalidArgument):
    """A message exceeds the store's ``max_message_bytes``; nothing was written."""


class Conflict(ThreadkeepError):
    """A concurrent writer won, or the write contradicts stored state."""


class IdempotencyConflict(Conflict):
    """An ``agui_id`` already stored in the chat was sent again with a different payload."""


class BackendUnavailable(ThreadkeepError):
    """The storage backend could not be reached or failed; the operation may be retried."""


class StorageFull(BackendUnavailable):
    """The backend cannot store more: its disk, quota or size limit is full.

    Raised for SQLite ``SQLITE_FULL`` ("database or disk is full", also a reached
    ``max_page_count``) and PostgreSQL ``disk_full`` (SQLSTATE 53100). The write that met
    it stored nothing (its transaction rolled back); reads keep working. Free space (or
    raise the limit) and retry.
    """


class StorageReadOnly(BackendUnavailable):
    """The backend refuses writes: read-only storage, permissions, or a read-only server.

    Raised for SQLite ``SQLITE_READONLY`` (the file, or the folder its ``-wal`` and
    ``-shm`` files live in, is not writable by this process, or it is on a read-only
    mount) and PostgreSQL ``read_only_sql_transaction`` (SQLSTATE 25006: a standby, or
    ``default_transaction_read_only``). Nothing was written; reads keep working. Fix the
    permissions (or point the store at the primary) and retry.
    """


class StorageDamaged(BackendUnavailable):
    """The database's own storage is damaged: not one row, but the file or pages under it.

    Raised for SQLite ``SQLITE_CORRUPT`` ("database disk image is malformed") and
    ``SQLITE_NOTADB`` ("file is not a database"), and PostgreSQL ``data_corrupted`` /
    ``index_corrupted`` (SQLSTATE XX001 / XX002). Retrying does not help: restore the
    database from a backup, or salvage it (SQLite: ``sqlite3 FILE .recover``;
    ``PRAGMA integrity_check`` shows the damage). A row damaged inside intact storage is a
    :class:`CorruptRecord` instead (``threadkeep check`` lists those). A subclass of
    :class:`BackendUnavailable`, which every storage failure was before this class existed.
    """


class CorruptRecord(ThreadkeepError):
    """A stored row does not read back as a record: damaged outside threadkeep.

    Raised by every read that meets the row (pages, single reads, previews, chat lists,
    archive bundles) instead of a raw ``JSONDecodeError``, pydantic ``ValidationError``,
    ``ValueError`` or ``TypeError``; other rows and other chats are unaffected. Open the
    store with ``corrupt_records="skip"`` to read pages past it (the page lists what it
    left out in ``Page.corrupt``), and run ``threadkeep check`` to list every damaged row.

    Attributes:
        kind: What the row holds: ``"message"``, ``"chat"``, ``"step"`` or ``"run"``.
        chat_id: The chat the row belongs to, when known (``None`` if unreadable too).
        seq: The row's ``seq`` (messages, chats, steps), when known.
        column: The column (or document field) that does not read: ``"body"``,
            ``"created_at"``...
        detail: What is wrong with it, in words.
    """

    def __init__(
        self,
        kind: str,
        *,
        chat_id: object,
        seq: object,
        column: str,
        detail: str,
    ) -> None:
        self.kind = kind
        self.chat_id = chat_id
        self.seq = seq
        self.column = column
        self.detail = detail
        super().__init__(
            f"stored {kind} of chat {chat_id} at seq {seq} is damaged: column {column!r} "
            f"{detail}; the row was changed outside threadkeep (run `threadkeep check` to "
            "list every damaged row, or open the store with corrupt_records='skip')"
        )

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes
        return (
            _rebuild_corrupt,
            (self.kind, self.chat_id, self.seq, self.column, self.detail),
        )


def _rebuild_corrupt(
    kind: str, chat_id: object, seq: object, column: str, detail: str
) -> CorruptRecord:
    return CorruptRecord(kind, chat_id=chat_id, seq=seq, column=column, detail=detail)


class ArchiveError(ThreadkeepError):
    """The archive store failed or holds something unexpected."""


class ArchiveIntegrityError(ArchiveError):
    """An archived bundle does not match its recorded SHA-256 or format version."""


class UnknownDriver(ThreadkeepError):
    """No installed driver serves a URL's scheme; the message names the package to install."""


class CapabilityNotSupported(ThreadkeepError):
    """The driver does not declare the capability an operation needs."""


class SchemaOutdated(ThreadkeepError):
    """The stored schema is not the one this code needs, and it was not upgraded on open.

    Raised by ``open()`` of a store opened with ``auto_migrate=False`` whose schema is older
    than the code (or missing), and by any open when the schema is at a revision this code
    does not know (a newer release migrated it). The message names the revisions and the
    command that upgrades (``threadkeep migrate``).

    Attributes:
        current: The revision the store is at (``None``: no schema yet).
        required: The revision this code needs (its newest).
    """

    def __init__(self, message: str, *, current: str | None, required: str | None) -> None:
        super().__init__(message)
        self.current = current
        self.required = required
