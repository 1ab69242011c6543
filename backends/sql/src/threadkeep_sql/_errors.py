"""Map native errors (SQLAlchemy, asyncpg, sqlite3/aiosqlite, Alembic) to threadkeep's errors.

Modelled on ``httpx._transports.default.map_httpcore_exceptions``: every database call of the
driver runs inside :func:`map_native_errors`, so no native exception escapes the driver.

=====================================================  ==========================
native error                                           threadkeep error
=====================================================  ==========================
unique violation (SQLSTATE 23505, SQLite ``UNIQUE``)   ``Conflict``
other integrity errors, ``DataError``, SQLite          ``InvalidArgument``
``SQLITE_TOOBIG``
disk full (SQLite ``SQLITE_FULL``, SQLSTATE 53100)     ``StorageFull``
read-only (``SQLITE_READONLY``, SQLSTATE 25006)        ``StorageReadOnly``
damaged (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``,        ``StorageDamaged``
SQLSTATE XX001, XX002)
connection refused/lost, timeouts, "database is        ``BackendUnavailable``
locked", pool exhaustion, any other database error
=====================================================  ==========================

Each message says what happened and what to do about it: SQLite's result code
(``sqlite3.Error.sqlite_errorcode``) and PostgreSQL's SQLSTATE pick the advice
(:func:`_sqlite_advice`, :func:`_postgres_advice`), so a full disk is not told to "check that
the server is running".

asyncpg's own errors, raised on the hot paths that run on asyncpg directly
(:mod:`threadkeep_sql._runner`), map the same way as the SQLAlchemy errors wrapping them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Literal

import asyncpg  # type: ignore[import-untyped]
from alembic.util.exc import CommandError
from sqlalchemy import exc as sa_exc

from threadkeep import (
    BackendUnavailable,
    Conflict,
    InvalidArgument,
    StorageDamaged,
    StorageFull,
    StorageReadOnly,
    ThreadkeepError,
)

__all__ = ["is_seq_collision", "is_unique_violation", "map_native_errors"]

_UNIQUE_SQLSTATE = "23505"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        nxt = getattr(current, "orig", None) if isinstance(current, sa_exc.DBAPIError) else None
        current = nxt or current.__cause__ or current.__context__


def is_unique_violation(exc: BaseException) -> bool:
    """Return whether ``exc`` (or what it wraps) is a unique-constraint violation."""
    for item in _chain(exc):
        if isinstance(item, asyncpg.UniqueViolationError):
            return True
        if getattr(item, "sqlstate", None) == _UNIQUE_SQLSTATE:
            return True
        if isinstance(item, sqlite3.IntegrityError) and "UNIQUE" in str(item):
            return True
    return False


def is_seq_collision(exc: BaseException) -> bool:
    """Return whether ``exc`` (or what it wraps) is a taken ``(chat_id, seq)`` of a message.

    The primary key of ``messages`` (of any partition of it): a row already holds the seq
    an append reserved. Steps' and ``message_refs``' own ``(chat_id, seq...)`` keys do not
    count.
    """
    for item in _chain(exc):
        if isinstance(item, asyncpg.UniqueViolationError):
            table = getattr(item, "table_name", None) or ""
            detail = getattr(item, "detail", None) or ""
            if table.startswith("messages") and detail.startswith("Key (chat_id, seq)="):
                return True
        if isinstance(item, sqlite3.IntegrityError) and str(item).endswith(
            "messages.chat_id, messages.seq"
        ):
            return True
    return False


def _describe(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


_Advice = tuple[type[ThreadkeepError], str]

_SQLITE_ADVICE: dict[int, _Advice] = {
    sqlite3.SQLITE_FULL: (
        StorageFull,
        "the disk holding the SQLite file is full (or its quota or max_page_count is "
        "reached); nothing of this write was stored: free space, then retry",
    ),
    sqlite3.SQLITE_READONLY: (
        StorageReadOnly,
        "the SQLite file is read-only for this process (the file, or the folder its -wal "
        "and -shm files are written to, is not writable by this user, or the disk is "
        "mounted read-only); nothing was written: give the user write permission on the "
        "file and its folder, then retry",
    ),
    sqlite3.SQLITE_CORRUPT: (
        StorageDamaged,
        "the SQLite file is damaged (its pages, not one row: `threadkeep check` cannot "
        "list it); restore it from a backup, or salvage what reads with "
        "`sqlite3 FILE .recover` (`sqlite3 FILE 'PRAGMA integrity_check'` shows the damage)",
    ),
    sqlite3.SQLITE_NOTADB: (
        StorageDamaged,
        "the file is no longer a SQLite database (its header was overwritten); restore it "
        "from a backup",
    ),
    sqlite3.SQLITE_CANTOPEN: (
        BackendUnavailable,
        "cannot open the SQLite file: it was deleted or moved, or its folder is not readable "
        "and writable by this user; put it back or fix the permissions, then retry",
    ),
    sqlite3.SQLITE_PERM: (
        BackendUnavailable,
        "the operating system denied access to the SQLite file; fix its permissions",
    ),
    sqlite3.SQLITE_IOERR: (
        BackendUnavailable,
        "the disk failed to read or write the SQLite file; check the disk (free space, "
        "kernel log) and retry",
    ),
    sqlite3.SQLITE_BUSY: (
        BackendUnavailable,
        "another connection held the SQLite write lock for longer than the 30 s busy "
        "timeout; nothing was written: retry when it is done",
    ),
    sqlite3.SQLITE_NOMEM: (
        BackendUnavailable,
        "SQLite ran out of memory; free memory and retry",
    ),
    sqlite3.SQLITE_TOOBIG: (
        InvalidArgument,
        "a value is larger than SQLite stores (1 GB by default); nothing was written: "
        "store smaller values",
    ),
}
"""Advice by SQLite primary result code (the low byte of ``sqlite_errorcode``)."""
_SQLITE_ADVICE[sqlite3.SQLITE_LOCKED] = _SQLITE_ADVICE[sqlite3.SQLITE_BUSY]

_RETRY = "; nothing of it was written: retry"
_POSTGRES_ADVICE: dict[str, _Advice] = {
    "53100": (StorageFull, "the PostgreSQL server's disk is full" + _RETRY + " once freed"),
    "53200": (BackendUnavailable, "the PostgreSQL server ran out of memory" + _RETRY),
    "53300": (
        BackendUnavailable,
        "the PostgreSQL server has no free connection (max_connections reached): lower "
        "pool_size (each store's pool grows to twice it), put a pooler in front, or raise "
        "max_connections",
    ),
    "25006": (
        StorageReadOnly,
        "the PostgreSQL server accepts no writes here (a standby, or "
        "default_transaction_read_only): point the store URL at the primary",
    ),
    "42501": (
        BackendUnavailable,
        "the PostgreSQL role lacks a privilege on the store's tables: GRANT it, or connect "
        "as the role that owns them",
    ),
    "57014": (
        BackendUnavailable,
        "PostgreSQL cancelled the statement (statement_timeout, or a cancel request)"
        + _RETRY
        + ", or raise statement_timeout for this role",
    ),
    "55P03": (BackendUnavailable, "a lock was not granted within lock_timeout" + _RETRY),
    "25P03": (
        BackendUnavailable,
        "PostgreSQL ended the session for idle_in_transaction_session_timeout" + _RETRY,
    ),
    "40001": (BackendUnavailable, "a concurrent transaction won (serialization)" + _RETRY),
    "40P01": (BackendUnavailable, "PostgreSQL broke a deadlock with this statement" + _RETRY),
    "57P01": (BackendUnavailable, "the PostgreSQL server is shutting down; retry once it is up"),
    "57P02": (BackendUnavailable, "the PostgreSQL server crashed; retry once it is up"),
    "57P03": (BackendUnavailable, "the PostgreSQL server is starting or stopping; retry soon"),
    "XX001": (
        StorageDamaged,
        "PostgreSQL found damaged data pages; restore from a backup (see its log)",
    ),
    "XX002": (
        StorageDamaged,
        "PostgreSQL found a damaged index; REINDEX it (the server log names it)",
    ),
}
"""Advice by PostgreSQL SQLSTATE (Appendix A of the PostgreSQL manual)."""


def _sqlite_advice(exc: BaseException) -> _Advice | None:
    """The class and advice for the SQLite result code in ``exc``'s chain, if one has advice."""
    for item in _chain(exc):
        code = getattr(item, "sqlite_errorcode", None)
        if isinstance(item, sqlite3.Error) and isinstance(code, int):
            return _SQLITE_ADVICE.get(code & 0xFF)
    return None


def _postgres_advice(exc: BaseException) -> _Advice | None:
    """The class and advice for the PostgreSQL SQLSTATE in ``exc``'s chain, if one has advice."""
    for item in _chain(exc):
        state = getattr(item, "sqlstate", None)
        if isinstance(state, str) and state in _POSTGRES_ADVICE:
            return _POSTGRES_ADVICE[state]
    return None


def _failure(exc: BaseException) -> ThreadkeepError:
    """The threadkeep error of a database failure: advice by result code, else generic."""
    described = f"{type(exc).__name__}: {_describe(exc)}"
    advice = _sqlite_advice(exc) or _postgres_advice(exc)
    if advice is not None:
        kind, text = advice
        return kind(f"{text} ({described})")
    msg = f"the database failed ({described}); check that it is running and reachable, then retry"
    return BackendUnavailable(msg)


class map_native_errors:  # noqa: N801 - used as ``with map_native_errors():``, a function's name
    """Run a block, turning native database errors into threadkeep errors.

    A context manager class rather than a ``@contextmanager`` generator: every statement
    of the driver enters it (twice per PostgreSQL statement: the connection taken and
    given back), and a generator-based one costs a generator, its frame and two resumes
    per use, where leaving this one without an error is one method call
    (``docs/performance.md``, "The SQL path per statement").

    Args:
        conflict: The message for a unique violation (default: a generic one naming the
            constraint the database reported).

    Raises:
        Conflict: For a unique violation the driver did not handle itself.
        InvalidArgument: For other integrity errors and data errors (a value the column
            cannot hold).
        StorageFull: For a full disk (SQLite ``SQLITE_FULL``, SQLSTATE 53100).
        StorageReadOnly: For read-only storage or a read-only server (``SQLITE_READONLY``,
            SQLSTATE 25006).
        StorageDamaged: For a damaged database file or pages (``SQLITE_CORRUPT``,
            ``SQLITE_NOTADB``, SQLSTATE XX001, XX002).
        BackendUnavailable: For connection failures, timeouts, locks and any other
            database, driver or migration error. The original is chained (``from``).
    """

    __slots__ = ("_conflict",)

    def __init__(self, conflict: str | None = None) -> None:
        self._conflict = conflict

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> Literal[False]:
        if exc is None or not isinstance(exc, _NATIVE) or isinstance(exc, ThreadkeepError):
            return False  # no error, or one that is not mapped: it goes on as it is
        raise _mapped(exc, self._conflict) from exc


_NATIVE = (
    sa_exc.SQLAlchemyError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # e.g. a statement sent as the server drops the connection
    sqlite3.Error,
    CommandError,
    OSError,
    TimeoutError,
)
"""The native errors :class:`map_native_errors` maps (every other exception passes as it is)."""


_INTEGRITY = (
    sa_exc.IntegrityError,
    asyncpg.IntegrityConstraintViolationError,
    sqlite3.IntegrityError,
)


def _mapped(exc: BaseException, conflict: str | None) -> ThreadkeepError:
    """The threadkeep error for the native error ``exc`` (one of :data:`_NATIVE`)."""
    if isinstance(exc, _INTEGRITY):
        return _refused(exc, conflict)
    if isinstance(exc, asyncpg.DataError):  # from the hot paths that run on asyncpg directly
        text = str(exc)
    elif isinstance(exc, sa_exc.DataError) or any(
        isinstance(item, asyncpg.DataError) for item in _chain(exc)
    ):
        text = _describe(exc)
    else:
        return _failure(exc)
    return InvalidArgument(f"the database cannot store a value: {text}")


def _refused(exc: BaseException, conflict: str | None) -> ThreadkeepError:
    """An integrity error: ``Conflict`` for a unique violation, else ``InvalidArgument``."""
    # asyncpg's and sqlite3's own errors reach here from the paths that run on them directly.
    text = _describe(exc) if isinstance(exc, sa_exc.IntegrityError) else str(exc)
    if is_unique_violation(exc):
        return Conflict(conflict or f"a unique key is already taken: {text}")
    return InvalidArgument(f"the database refused the write: {text}")
