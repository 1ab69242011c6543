"""Map native errors (SQLAlchemy, asyncpg, sqlite3/aiosqlite, Alembic) to threadkeep's errors.

Modelled on ``httpx._transports.default.map_httpcore_exceptions``: every database call of the
driver runs inside :func:`map_native_errors`, so no native exception escapes the driver.

=====================================================  ==========================
native error                                           threadkeep error
=====================================================  ==========================
unique violation (SQLSTATE 23505, SQLite ``UNIQUE``)   ``Conflict``
other integrity errors, ``DataError``                  ``InvalidArgument``
connection refused/lost, timeouts, "database is        ``BackendUnavailable``
locked", pool exhaustion, any other database error
=====================================================  ==========================

asyncpg's own errors, raised on the hot paths that run on asyncpg directly
(:mod:`threadkeep_sql._runner`), map the same way as the SQLAlchemy errors wrapping them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg  # type: ignore[import-untyped]
from alembic.util.exc import CommandError
from sqlalchemy import exc as sa_exc

from threadkeep import BackendUnavailable, Conflict, InvalidArgument, ThreadkeepError

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


@contextmanager
def map_native_errors(conflict: str | None = None) -> Iterator[None]:
    """Run a block, turning native database errors into threadkeep errors.

    Args:
        conflict: The message for a unique violation (default: a generic one naming the
            constraint the database reported).

    Raises:
        Conflict: For a unique violation the driver did not handle itself.
        InvalidArgument: For other integrity errors and data errors (a value the column
            cannot hold).
        BackendUnavailable: For connection failures, timeouts, locks and any other
            database, driver or migration error. The original is chained (``from``).
    """
    try:
        yield
    except ThreadkeepError:
        raise
    except sa_exc.IntegrityError as exc:
        if is_unique_violation(exc):
            text = conflict or f"a unique key is already taken: {_describe(exc)}"
            raise Conflict(text) from exc
        raise InvalidArgument(f"the database refused the write: {_describe(exc)}") from exc
    except sa_exc.DataError as exc:
        raise InvalidArgument(f"the database cannot store a value: {_describe(exc)}") from exc
    except (asyncpg.IntegrityConstraintViolationError, sqlite3.IntegrityError) as exc:
        # asyncpg's own errors reach here from the hot paths that run on asyncpg directly.
        if is_unique_violation(exc):
            raise Conflict(conflict or f"a unique key is already taken: {exc}") from exc
        raise InvalidArgument(f"the database refused the write: {exc}") from exc
    except asyncpg.DataError as exc:
        raise InvalidArgument(f"the database cannot store a value: {exc}") from exc
    except (
        sa_exc.SQLAlchemyError,
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,  # e.g. a statement sent as the server drops the connection
        sqlite3.Error,
        CommandError,
        OSError,
        TimeoutError,
    ) as exc:
        if any(isinstance(item, asyncpg.DataError) for item in _chain(exc)):
            raise InvalidArgument(f"the database cannot store a value: {_describe(exc)}") from exc
        msg = (
            f"the database failed ({type(exc).__name__}: {_describe(exc)}); check that it "
            "is running and reachable, then retry"
        )
        raise BackendUnavailable(msg) from exc
