"""Runners: how a prebuilt statement reaches the database on the hot paths.

Every statement is built with SQLAlchemy Core. On SQLite a read runs on the connection's
thread in one hop (``threadkeep_sql._lite.LiteRunner``, a :class:`Runner` without a
SQLAlchemy connection) and a write through the SQLAlchemy connection (:class:`Runner`). On
PostgreSQL a :class:`PgRunner` runs it on the pooled
connection's asyncpg connection (``AsyncConnection.get_raw_connection().driver_connection``,
SQLAlchemy's documented escape hatch): the statement is compiled once to the PostgreSQL
dialect (:class:`RawStatement`), its parameters go through the column types' bind processors
(``KeyText`` escaping included) and its rows through their result processors, and asyncpg's
prepared-statement cache serves every later call. SQLAlchemy's async execute path (greenlet
hand-off, execution context, cursor adapter, row objects) costs 0.15-0.25 ms of client CPU
per statement, about as much as the whole round trip of a cached 50-row page
(``bench/sql_bench.py``), and this path skips it.

Each asyncpg connection also keeps its own prepared statements (:class:`Prepared`, up to
:data:`MAX_PREPARED`), so a hot statement runs as ``PreparedStatement.fetch`` without the
statement-cache look-up of ``Connection.fetch`` (its LRU, timeout bookkeeping and retry
wrapper: measured per call in ``docs/performance.md``). A statement the server no longer
accepts as prepared (a schema change altered its result type, or the server forgot it) is
prepared again and run once more, as asyncpg does for its own cache outside a transaction.
Behind a transaction-mode pooler this runner is not used at all (``Database``), and a URL
with ``prepared_statement_cache_size=0`` turns the kept statements off.

Native errors are mapped where the connection is taken (``Database.runner``), so asyncpg
errors go through the driver's one ``map_native_errors`` like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["MAX_PREPARED", "Compiled", "PgRunner", "Prepared", "RawStatement", "Runner"]

Row = Sequence[Any]
Params = Mapping[str, Any]
_NO_PARAMS: Params = {}

MAX_PREPARED = 256
"""Prepared statements one asyncpg connection keeps; past it, ``Connection.fetch`` serves."""
_STALE = (
    asyncpg.exceptions.InvalidCachedStatementError,
    asyncpg.exceptions.InvalidSQLStatementNameError,
)
"""The server no longer runs a kept statement as prepared: prepare it again, try once more."""

Prepared = dict[str, Any]
"""One asyncpg connection's kept ``PreparedStatement`` objects, by SQL text."""


@dataclass(frozen=True, slots=True)
class RawStatement:
    """A statement compiled once for asyncpg.

    Attributes:
        sql: The SQL text with ``$n`` placeholders.
        names: The parameter name of each placeholder, in order.
        defaults: Values of parameters the statement carries itself (literals).
        binds: The bind processor of each placeholder, or ``None``.
        results: The result processor of each column, or ``None`` when no column has one
            (rows are then asyncpg's records as they come).
        plain: Whether no placeholder has a bind processor (:meth:`args` then takes its
            values in one comprehension).
    """

    sql: str
    names: tuple[str, ...]
    defaults: Mapping[str, Any]
    binds: tuple[Callable[[Any], Any] | None, ...]
    results: tuple[Callable[[Any], Any] | None, ...] | None
    plain: bool = False

    @classmethod
    def compile(cls, stmt: sa.Executable, dialect: Dialect) -> RawStatement:
        """Compile ``stmt`` for ``dialect`` (a PostgreSQL asyncpg dialect).

        Raises:
            ValueError: If the statement needs rendering per call (an expanding ``IN``
                list): such statements go through SQLAlchemy (``Runner.conn``).
        """
        compiled = stmt.compile(dialect=dialect)  # type: ignore[attr-defined]
        if "__[POSTCOMPILE_" in compiled.string:
            raise ValueError("a statement with an expanding IN cannot be compiled once")
        names = tuple(compiled.positiontup or ())
        binds = tuple(
            compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect)
            for name in names
        )
        defaults = {
            name: compiled.binds[name].effective_value
            for name in names
            if not compiled.binds[name].required
        }
        columns = getattr(stmt, "exported_columns", ())  # SELECT columns, or RETURNING
        processors = tuple(
            col.type.dialect_impl(dialect).result_processor(dialect, None) for col in columns
        )
        results = processors if any(p is not None for p in processors) else None
        plain = all(process is None for process in binds)
        return cls(compiled.string, names, defaults, binds, results, plain)

    def args(self, params: Params) -> list[Any]:
        """Return the positional arguments for ``params`` (bind processors applied).

        Raises:
            KeyError: If a required parameter is missing (a bug in the caller).
        """
        defaults = self.defaults
        if self.plain:
            return [params[name] if name in params else defaults[name] for name in self.names]
        values = []
        for name, process in zip(self.names, self.binds, strict=True):
            value = params[name] if name in params else defaults[name]
            values.append(value if process is None else process(value))
        return values

    def rows(self, records: Sequence[Row]) -> Sequence[Row]:
        """Return ``records`` with the result processors applied."""
        if self.results is None:
            return records
        return [self.row(record) for record in records]

    def row(self, record: Row) -> Row:
        """Return one record with the result processors applied."""
        if self.results is None:
            return record
        return tuple(
            value if process is None else process(value)
            for value, process in zip(record, self.results, strict=True)
        )


class Compiled:
    """The :class:`RawStatement` of each statement a store runs, compiled on first use.

    Statements are keyed by identity: they are built once and kept (module constants, and
    the chat pages ``_chats.chat_page`` keeps per filter shape). Past :data:`MAX_KEPT`
    statements (a caller building them per call) the rest are compiled every time.
    """

    MAX_KEPT = 1024

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._by_id: dict[int, tuple[sa.Executable, RawStatement]] = {}

    def get(self, stmt: sa.Executable) -> RawStatement:
        """Return the compiled form of ``stmt`` (compiling it the first time)."""
        entry = self._by_id.get(id(stmt))
        if entry is not None and entry[0] is stmt:
            return entry[1]
        raw = RawStatement.compile(stmt, self._dialect)
        if len(self._by_id) < self.MAX_KEPT:
            self._by_id[id(stmt)] = (stmt, raw)
        return raw


class Runner:
    """Runs statements through a SQLAlchemy connection (SQLite, and anything not hot).

    ``conn`` is there for statements built per call, which go through SQLAlchemy (and its
    compiled cache) on either engine.
    """

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    @property
    def conn(self) -> AsyncConnection:
        """The SQLAlchemy connection (for statements built per call)."""
        return self._conn

    async def all(self, stmt: sa.Executable, params: Params = _NO_PARAMS) -> Sequence[Row]:
        """Return every row."""
        return (await self.conn.execute(stmt, dict(params))).all()

    async def first(self, stmt: sa.Executable, params: Params = _NO_PARAMS) -> Row | None:
        """Return the first row, or ``None``."""
        return (await self.conn.execute(stmt, dict(params))).first()

    async def scalar(self, stmt: sa.Executable, params: Params = _NO_PARAMS) -> Any:
        """Return the first column of the first row, or ``None``."""
        return (await self.conn.execute(stmt, dict(params))).scalar()


class PgRunner(Runner):
    """Runs statements on the asyncpg connection under ``conn`` (see the module docstring).

    ``prepared`` is the connection's own :data:`Prepared` map (``None``: no statements are
    kept, every call goes through ``Connection.fetch``).
    """

    def __init__(
        self, conn: AsyncConnection, driver: Any, compiled: Compiled, prepared: Prepared | None
    ) -> None:
        super().__init__(conn)
        self._driver = driver
        self._compiled = compiled
        self._prepared = prepared

    async def all(self, stmt: sa.Executable, params: Params = _NO_PARAMS) -> Sequence[Row]:
        """Return every row."""
        raw = self._compiled.get(stmt)
        records: Sequence[Row] = await self._run(raw, raw.args(params), one=False)
        return raw.rows(records)

    async def first(self, stmt: sa.Executable, params: Params = _NO_PARAMS) -> Row | None:
        """Return the first row, or ``None``."""
        raw = self._compiled.get(stmt)
        record: Row | None = await self._run(raw, raw.args(params), one=True)
        return None if record is None else raw.row(record)

    async def scalar(self, stmt: sa.Executable, params: Params = _NO_PARAMS) -> Any:
        """Return the first column of the first row, or ``None``."""
        row = await self.first(stmt, params)
        return None if row is None else row[0]

    async def _run(self, raw: RawStatement, args: list[Any], *, one: bool) -> Any:
        """Run ``raw`` as this connection's prepared statement (``fetchrow`` when ``one``).

        Raises:
            asyncpg.PostgresError: As ``Connection.fetch`` does (mapped by the caller's
                ``Database.runner``); a stale prepared statement is prepared again once.
        """
        kept = self._prepared
        sql = raw.sql
        if kept is None or (sql not in kept and len(kept) >= MAX_PREPARED):
            driver = self._driver
            return await (driver.fetchrow(sql, *args) if one else driver.fetch(sql, *args))
        for retry in (False, True):
            statement = kept.get(sql)
            if statement is None:
                statement = kept[sql] = await self._driver.prepare(sql)
            try:
                return await (statement.fetchrow(*args) if one else statement.fetch(*args))
            except _STALE:
                kept.pop(sql, None)
                if retry or self._driver.is_in_transaction():
                    raise
            except asyncpg.exceptions.OutdatedSchemaCacheError:
                kept.clear()  # asyncpg has reloaded its type cache; prepare afresh next time
                raise
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
