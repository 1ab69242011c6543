"""SQLite: a whole operation on the connection's thread, in one hop.

aiosqlite runs every call of a connection on that connection's own thread and hands the
result back to the event loop; through SQLAlchemy each statement costs several of those
hand-offs (cursor, execute, fetch, close, plus ``BEGIN`` and ``COMMIT``), and on a loaded
machine each one waits for the thread to be scheduled and for the GIL. The hot paths
(append, page, chat previews) instead run one plain function on the thread
(:func:`run_on_thread`) that executes every statement of the operation with the
``sqlite3`` connection directly, inside ``BEGIN IMMEDIATE`` ... ``COMMIT`` for writes.

The statements are still the driver's SQLAlchemy Core statements, compiled once for the
SQLite dialect (:class:`~threadkeep_sql._runner.RawStatement`: ``?`` placeholders, the
column types' bind and result processors), so values are stored exactly as on the
SQLAlchemy path. The function returns plain rows; models are built back on the event loop
(where a ``corrupt_records="skip"`` read collects damaged rows).

The chat and message reads that run one statement (``get_chat``, ``find_live_chat``,
``page_chats``, ``get_message``...) take :class:`LiteRunner` from ``Database.runner()``:
the same ``all``/``first``/``scalar`` as the SQLAlchemy runner, each statement one hop.

The hop goes through ``aiosqlite.Connection._execute`` (the method every public aiosqlite
call uses; there is no public way to run a function on the connection's thread).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from threadkeep.driver import finish

from ._lite_rows import RowConverter
from ._runner import Compiled, RawStatement, Runner

if TYPE_CHECKING:
    from ._engine import Database
    from ._lite_file import LiteFile

__all__ = ["LiteOps", "LiteRunner", "run_on_thread"]

T = TypeVar("T")
Row = Sequence[Any]
Params = Mapping[str, Any]


_CONVERTERS: dict[int, RowConverter] = {}
"""Converters by ``id`` of their ``RawStatement`` (which each converter keeps alive)."""
_MAX_CONVERTERS = 1024


def _converter(stmt: sa.Executable, compiled: Compiled) -> RowConverter:
    """The :class:`RowConverter` of ``stmt``, kept as long as ``compiled`` keeps its statement."""
    raw = compiled.get(stmt)
    converter = _CONVERTERS.get(id(raw))
    if converter is not None and converter.raw is raw:
        return converter
    converter = RowConverter(stmt, raw)
    if len(_CONVERTERS) < _MAX_CONVERTERS:
        _CONVERTERS[id(raw)] = converter
    return converter


class LiteOps:
    """The driver's statements on a ``sqlite3`` connection (used on its own thread only).

    Rows come back converted a column at a time (:class:`~threadkeep_sql._lite_rows.RowConverter`):
    the values SQLAlchemy's result processors give, timestamps as aware UTC datetimes.
    """

    def __init__(self, conn: sqlite3.Connection, compiled: Compiled) -> None:
        self._conn = conn
        self._compiled = compiled

    def all(self, stmt: sa.Executable, params: Params) -> Sequence[Row]:
        """Return every row, converted."""
        converter = _converter(stmt, self._compiled)
        raw = converter.raw
        return converter.rows(self._conn.execute(raw.sql, raw.args(params)).fetchall())

    def first(self, stmt: sa.Executable, params: Params) -> Row | None:
        """Return the first row, or ``None``."""
        converter = _converter(stmt, self._compiled)
        raw = converter.raw
        record = self._conn.execute(raw.sql, raw.args(params)).fetchone()
        return None if record is None else converter.rows([record])[0]

    def scalar(self, stmt: sa.Executable, params: Params) -> Any:
        """Return the first column of the first row, or ``None``."""
        row = self.first(stmt, params)
        return None if row is None else row[0]

    def execute_many(self, stmt: sa.Executable, rows: Sequence[Params]) -> None:
        """Run a write statement once per parameter set (``executemany``)."""
        raw = self._compiled.get(stmt)
        self._conn.executemany(raw.sql, [raw.args(row) for row in rows])

    def compiled(self, stmt: sa.Executable) -> RawStatement:
        """The compiled form of ``stmt``: its SQL, parameter names and bind processors."""
        return self._compiled.get(stmt)

    def execute_many_raw(self, raw: RawStatement, rows: Sequence[Sequence[Any]]) -> None:
        """``executemany`` of positional rows already in ``raw``'s order and processed."""
        self._conn.executemany(raw.sql, rows)


_NO_PARAMS: Params = {}


class LiteRunner(Runner):
    """``Database.runner()`` for SQLite reads: each statement in one hop (:class:`LiteOps`).

    There is no SQLAlchemy connection behind it: a statement that cannot be compiled once
    (an expanding ``IN``) has no place here (``Database.read()`` takes those).
    """

    def __init__(self, driver: Any, compiled: Compiled) -> None:
        self._driver = driver
        self._ops = LiteOps(driver._conn, compiled)

    @property
    def conn(self) -> AsyncConnection:
        """Not available on SQLite's one-hop reads.

        Raises:
            RuntimeError: Always (a bug in the caller: use ``Database.read()``).
        """
        raise RuntimeError("a SQLite read runner has no SQLAlchemy connection; use read()")

    async def all(self, stmt: sa.Executable, params: Params = _NO_PARAMS) -> Sequence[Row]:
        """Return every row, converted (one hop)."""
        rows: Sequence[Row] = await self._driver._execute(self._ops.all, stmt, params)
        return rows

    async def first(self, stmt: sa.Executable, params: Params = _NO_PARAMS) -> Row | None:
        """Return the first row, converted, or ``None`` (one hop)."""
        row: Row | None = await self._driver._execute(self._ops.first, stmt, params)
        return row

    async def scalar(self, stmt: sa.Executable, params: Params = _NO_PARAMS) -> Any:
        """Return the first column of the first row, or ``None`` (one hop)."""
        return await self._driver._execute(self._ops.scalar, stmt, params)

    async def call(self, fn: Callable[[LiteOps], T]) -> T:
        """Return ``fn(ops)``, run on the connection's thread (one hop; reads only)."""
        result: T = await self._driver._execute(fn, self._ops)
        return result


def _whole(
    fn: Callable[[LiteOps], T],
    conn: sqlite3.Connection,
    ops: LiteOps,
    write: bool,
    file: LiteFile | None = None,
) -> T:
    """Run ``fn`` (on the connection's thread); a write inside one ``BEGIN IMMEDIATE``.

    A write commits only if the path still names the file the store opened (``file``,
    checked last: see :mod:`threadkeep_sql._lite_file`); otherwise it is rolled back.
    """
    if not write:
        return fn(ops)
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(ops)
        if file is not None:
            file.check()
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


async def run_on_thread(
    db: Database, fn: Callable[[LiteOps], T], *, write: bool, conflict: str | None = None
) -> T:
    """Run ``fn`` with a pooled SQLite connection, on that connection's thread, in one hop.

    Args:
        db: A SQLite database.
        fn: Runs every statement of one operation through the :class:`LiteOps` it is
            given; it must not touch the event loop (it runs on another thread).
        write: Whether ``fn`` writes: it then runs inside ``BEGIN IMMEDIATE`` (committed
            when it returns, rolled back when it raises) under the store's writer lock,
            and to its end even if the caller is cancelled meanwhile.
        conflict: The message of the ``Conflict`` a unique violation raises (default: a
            generic one naming the constraint).

    Returns:
        What ``fn`` returned.

    Raises:
        ThreadkeepError: What ``fn`` raised, or the mapped ``sqlite3`` error
            (``map_native_errors``).
    """
    if not write:  # a kept connection, no lock (``Database.read_runner_here``)
        async with db.read_runner_here() as run:
            assert isinstance(run, LiteRunner)
            return await run.call(fn)
    async with db.sqlite_driver(write=True, conflict=conflict) as driver:
        conn: sqlite3.Connection = driver._conn
        ops = LiteOps(conn, db.sqlite_compiled)
        work = driver._execute(_whole, fn, conn, ops, True, db.sqlite_file)
        result: T = await finish(work)
        return result
