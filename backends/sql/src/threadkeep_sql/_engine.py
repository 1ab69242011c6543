"""Engines and connections: how each operation reaches the database.

Three ways in, chosen per operation by the driver (and :meth:`Database.runner`, the same
connections behind a :class:`~threadkeep_sql._runner.Runner` for the hot paths):

- :meth:`Database.read`: reads. PostgreSQL: ``AUTOCOMMIT`` (no ``BEGIN``/``COMMIT`` round
  trips) on connections kept checked out between operations (no pool round trip in the
  client). SQLite: no ``BEGIN`` either (each statement is its own snapshot).
- :meth:`Database.write`: one statement that is atomic by itself. PostgreSQL: ``AUTOCOMMIT``
  again; SQLite: a write transaction, as below.
- :meth:`Database.transaction`: several statements, all or nothing. PostgreSQL: a
  transaction; SQLite: ``BEGIN IMMEDIATE`` (the SQLAlchemy recipe for pysqlite/aiosqlite:
  the driver's own ``BEGIN`` is switched off and the ``begin`` event emits ours), so the write
  lock is taken up front and a read-modify-write never fails half way with "database is
  locked". SQLAlchemy rolls back on any exception, so a failed write never leaves a
  transaction open.

SQLite also runs with WAL and ``synchronous=NORMAL`` (a commit does not wait for ``fsync``
of the database file: it survives an application crash, not necessarily a power loss; the
documented defaults, ``docs/performance.md``), a 30 s busy timeout and, inside one
process, an ``asyncio.Lock`` that queues writers before they take a pooled connection
(cheaper than the busy handler's sleeps). ``sqlite+aiosqlite:///:memory:`` is one shared
connection (``StaticPool``) behind a lock that every operation takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
import uuid
import weakref
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from threadkeep import InvalidArgument, ThreadkeepError
from threadkeep.driver import complete, enter_whole, finish

from ._errors import map_native_errors
from ._lite import LiteRunner
from ._lite_file import LiteFile
from ._replica import ReadRouter
from ._runner import Compiled, PgRunner, Prepared, Runner

__all__ = ["POSTGRES_QUERY_KEYS", "SCHEMES", "Database", "Dialect", "normalize_url"]

Dialect = Literal["postgresql", "sqlite"]
T = TypeVar("T")

SCHEMES: dict[str, str] = {
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "sqlite": "sqlite+aiosqlite",
    "postgresql+asyncpg": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
}
"""Served URL schemes and the SQLAlchemy driver name each maps to."""

BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite writer waits for another process's write lock, in milliseconds."""

_READ_OPTION = "threadkeep_read"

DRAIN_SECONDS = 30.0
"""How long closing a store waits for its running operations to give back their connections."""

_REPORTED = (asyncpg.PostgresError, SQLAlchemyError, ThreadkeepError)
"""Errors after which a connection is still in a known state."""


POSTGRES_QUERY_KEYS = frozenset(
    {
        "schema",  # threadkeep's own: the PostgreSQL schema (see SqlStore)
        # threadkeep's own scale options (_options.SCALE_QUERY_KEYS):
        "partitions",
        "read_url",
        "read_wait",
        "read_consistency",
        "pooler",
        "host",  # SQLAlchemy: several hosts
        "port",
        "prepared_statement_cache_size",  # SQLAlchemy's asyncpg dialect
        # asyncpg.connect keyword arguments that can be given as text:
        "passfile",
        "service",
        "servicefile",
        "timeout",
        "statement_cache_size",
        "max_cached_statement_lifetime",
        "max_cacheable_statement_size",
        "command_timeout",
        "ssl",
        "direct_tls",
        "target_session_attrs",
        "krbsrvname",
        "gsslib",
    }
)
"""The ``?key=value`` query parameters a ``postgresql+asyncpg://`` URL may carry."""

_QUERY_HINTS = {"sslmode": "ssl (for example ?ssl=require)", "search_path": "schema"}


def normalize_url(url: str) -> URL:
    """Parse a store URL and pin the async driver (``sqlite`` -> ``sqlite+aiosqlite``...).

    Raises:
        InvalidArgument: If the URL cannot be parsed, its scheme is not served here, its
            port is not a number from 1 to 65535, a PostgreSQL URL has a query parameter
            outside :data:`POSTGRES_QUERY_KEYS`, or a SQLite URL names no database file
            (``:memory:`` is the in-memory database), has a host, user, password, port or
            query parameter, or a NUL in its path; the message names the part.
    """
    scheme = url.partition("://")[0].lower()
    if scheme not in SCHEMES:
        msg = f"threadkeep-sql serves {sorted(SCHEMES)}, not {scheme + '://'!r}"
        raise InvalidArgument(msg)
    try:
        parsed = make_url(url)
    except ValueError as exc:  # a port that is not a number, or an unclosed '['
        netloc = _netloc(url).rpartition("@")[2]
        if netloc.startswith("[") and "]" not in netloc:
            msg = (
                f"the host {netloc!r} in the store URL opens '[' and never closes it; the URL "
                "is malformed: write an IPv6 host in brackets, for example "
                "postgresql+asyncpg://user@[::1]:5432/db"
            )
            raise InvalidArgument(msg) from exc
        port = _port_text(url)
        msg = f"the port {port!r} in the store URL is not a number; give 1 to 65535"
        raise InvalidArgument(msg) from exc
    except ArgumentError as exc:
        raise InvalidArgument(f"cannot parse store URL: {exc}") from exc
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        msg = f"the port {parsed.port} in the store URL is out of range; give 1 to 65535"
        raise InvalidArgument(msg)
    if parsed.get_backend_name() == "postgresql":
        _check_postgres_query(parsed)
    else:
        _check_sqlite(parsed)
    return parsed.set(drivername=SCHEMES[scheme])


SQLITE_URL_FORM = "sqlite+aiosqlite:///path/to/file.db"
"""How a SQLite store URL is written, for error messages (four slashes for an absolute path)."""

_SQLITE_FORMS = (
    f"write {SQLITE_URL_FORM} (relative to the working directory; "
    "sqlite+aiosqlite:////abs/path.db for an absolute path), or "
    "sqlite+aiosqlite:///:memory: for a throwaway in-memory store"
)


def _check_sqlite(url: URL) -> None:
    """Refuse a SQLite URL that names no file, or has a host, user, port, NUL or query.

    SQLAlchemy would otherwise raise its own ``ArgumentError`` or ``ValueError`` at connect
    time, or warn and ignore a query parameter (``?mode=ro``). An empty path
    (``sqlite+aiosqlite:///``, say from an unset shell variable) would be a throwaway
    in-memory database: everything written is gone when the store closes. In-memory SQLite
    is only used when asked for by name (``:memory:``).

    Raises:
        InvalidArgument: Naming the part that is wrong and the URL form to use.
    """
    if not url.database:
        msg = f"the SQLite store URL names no database file; {_SQLITE_FORMS}"
        raise InvalidArgument(msg)
    parts = [
        f"{name} {value!r}"
        for name, value in (
            ("host", url.host),
            ("user", url.username),
            ("password", "***" if url.password is not None else None),
            ("port", url.port),
        )
        if value is not None
    ]
    if parts:
        msg = (
            f"a SQLite store URL has no host, user, password or port (this one has "
            f"{', '.join(parts)}): SQLite is a local file; {_SQLITE_FORMS}"
        )
        raise InvalidArgument(msg)
    if "\x00" in url.database:
        msg = "the SQLite path in the store URL holds a NUL character (%00); remove it"
        raise InvalidArgument(msg)
    if url.query:
        names = ", ".join(repr(key) for key in sorted(url.query))
        msg = (
            f"unsupported query parameter{'s' if len(url.query) > 1 else ''} {names} in the "
            "SQLite store URL; supported: none (threadkeep opens the file read-write with WAL "
            f"and a {BUSY_TIMEOUT_MS // 1000} s busy timeout itself); remove everything "
            "from '?'"
        )
        raise InvalidArgument(msg)


def _netloc(url: str) -> str:
    return url.partition("://")[2].split("/", 1)[0].split("?", 1)[0]


def _port_text(url: str) -> str:
    return _netloc(url).rpartition("@")[2].rpartition(":")[2]


def _check_postgres_query(url: URL) -> None:
    unknown = sorted(set(url.query) - POSTGRES_QUERY_KEYS)
    if not unknown:
        return
    hints = [f"use {_QUERY_HINTS[key]} instead of {key}" for key in unknown if key in _QUERY_HINTS]
    msg = (
        f"unknown query parameter{'s' if len(unknown) > 1 else ''} "
        f"{', '.join(repr(k) for k in unknown)} in the PostgreSQL store URL"
        + (f" ({'; '.join(hints)})" if hints else "")
        + f"; known: {', '.join(sorted(POSTGRES_QUERY_KEYS))}"
    )
    raise InvalidArgument(msg)


_TYPED_CONNECT_KEYS: dict[str, type] = {
    "timeout": float,
    "command_timeout": float,
    "statement_cache_size": int,
    "max_cached_statement_lifetime": int,
    "max_cacheable_statement_size": int,
    "direct_tls": bool,
}
"""asyncpg.connect keywords that SQLAlchemy passes on from the URL as text, and their types."""


def _typed_connect_args(url: URL) -> tuple[URL, dict[str, Any]]:
    """Take the typed asyncpg keywords out of ``url``'s query, converted to their types.

    SQLAlchemy's asyncpg dialect passes query parameters on as strings, and asyncpg then
    fails at connect with a bare ``TypeError`` (``statement_cache_size='0'``).

    Raises:
        InvalidArgument: If a value is not of its type (``direct_tls`` takes true/false/1/0),
            is out of its range (a timeout: a positive, finite number of seconds; a size or
            lifetime: a whole number, 0 or more), or is given twice.
    """
    args: dict[str, Any] = {}
    for key, kind in _TYPED_CONNECT_KEYS.items():
        if key not in url.query:
            continue
        value = url.query[key]
        if not isinstance(value, str):  # SQLAlchemy gives a repeated key as a tuple
            msg = f"the PostgreSQL URL parameter {key} is given more than once; give it once"
            raise InvalidArgument(msg)
        args[key] = _typed_value(key, kind, value.strip())
    return url.difference_update_query(args), args


def _typed_value(key: str, kind: type, text: str) -> Any:
    """``text`` as ``kind``, in the range asyncpg takes (else it fails at connect)."""
    if kind is bool:
        value = {"true": True, "1": True, "false": False, "0": False}.get(text.lower())
        if value is None:
            msg = f"the PostgreSQL URL parameter {key}={text!r} is not true, false, 1 or 0"
            raise InvalidArgument(msg)
        return value
    if kind is float:
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or seconds <= 0:
            msg = (
                f"the PostgreSQL URL parameter {key}={text!r} is not a positive, finite "
                "number of seconds"
            )
            raise InvalidArgument(msg)
        return seconds
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        msg = f"the PostgreSQL URL parameter {key}={text!r} is not a whole number, 0 or more"
        raise InvalidArgument(msg)
    return number


def _unique_statement_name() -> str:
    # Unique per statement, so a pooler that hands out another server connection never
    # meets a name it has seen (SQLAlchemy's asyncpg dialect, "Prepared Statement Name").
    return f"__threadkeep_{uuid.uuid4().hex}__"


def _keeps_statements(url: URL) -> bool:
    """Whether the runner may keep prepared statements on its connections (``_runner``).

    Not when the URL turns asyncpg's or SQLAlchemy's statement cache off
    (``statement_cache_size=0``, ``prepared_statement_cache_size=0``): that is how a
    pooler that does not keep prepared statements is served without ``pooler=``.
    """
    return all(
        str(url.query.get(key, "")) != "0"
        for key in ("statement_cache_size", "prepared_statement_cache_size")
    )


def _is_memory(url: URL) -> bool:
    return url.database == ":memory:"


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Turn off the driver's implicit BEGIN: _sqlite_begin emits the one we want.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    if not connection.get_execution_options().get(_READ_OPTION):
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _pin(engine: AsyncEngine, file: LiteFile) -> None:
    """Open ``file`` by URI, pin it at the first connection, check it before each commit.

    See :mod:`threadkeep_sql._lite_file`: later connections never create the file, and a
    write transaction refuses to commit into a file the path no longer names.
    """

    def do_connect(_dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]) -> None:
        file.connect_args(cargs, cparams)

    def connected(_dbapi_connection: Any, _record: Any) -> None:
        file.connected()

    def failed(context: Any) -> None:
        # Say that the file went when it did ("unable to open database file" does not).
        if isinstance(context.original_exception, sqlite3.Error):
            file.check()

    event.listen(engine.sync_engine, "do_connect", do_connect)
    event.listen(engine.sync_engine, "connect", connected)
    event.listen(engine.sync_engine, "handle_error", failed)
    event.listen(engine.sync_engine, "commit", file.before_commit)


async def _empty_stale_wal(held: list[tuple[AsyncConnection, Any]]) -> None:
    """Checkpoint a moved file's WAL into it and truncate the WAL, before closing.

    SQLite does not checkpoint on close once the database file was moved or deleted, and
    leaves the ``-wal`` file at the old name, where the next opener of that path would
    apply the old file's pages to whatever file is there now (a backup restored with
    ``mv`` read back as the old store). ``wal_checkpoint(TRUNCATE)`` on a connection to the
    old file writes those pages into the old file (through its open descriptor) and
    empties the ``-wal`` file the connections hold, so nothing of it reaches the new file.
    Done on the first held connection (a store normally holds one; without one, SQLite's
    own behaviour stays).
    """
    for _conn, driver in held[:1]:
        cursor = await driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        await cursor.close()


def _refuse_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Pool checkout hook: a connection the server has closed is replaced, not handed out.

    SQLAlchemy's documented pessimistic disconnect handling: raising ``DisconnectionError``
    here makes the pool discard the connection and check out another (issue 12). The test
    costs nothing (asyncpg already knows the socket closed), unlike ``pool_pre_ping``.
    """
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("the server closed this pooled connection")


async def _discard(held: tuple[AsyncConnection, Any], exc: BaseException) -> None:
    """Close a held connection after an error; invalidate it unless the server reported it."""
    if held[1].is_closed() or not isinstance(exc, _REPORTED):
        await held[0].invalidate()
    await held[0].close()


class _LiteRead:
    """``Database.runner()`` for a SQLite file's reads: a kept connection, no lock, no ``BEGIN``.

    What ``Database.sqlite_driver(write=False)`` does, as a class: a generator-based
    context manager (two of them, nested, through ``_runner``) cost about as much client
    CPU as the hop to the connection's thread (``docs/performance.md``).
    """

    __slots__ = ("_db", "_held")

    def __init__(self, db: Database) -> None:
        self._db = db
        self._held: tuple[AsyncConnection, Any] | None = None

    async def __aenter__(self) -> LiteRunner:
        db = self._db
        if db._lite_held:
            held = db._lite_held.pop()
        else:
            with map_native_errors():
                held = await db._checkout()
        self._held = held
        return LiteRunner(held[1], db.sqlite_compiled)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        db, held = self._db, self._held
        assert held is not None
        self._held = None
        if exc is None:
            if len(db._lite_held) < db._held_max:
                db._lite_held.append(held)
                return
            with map_native_errors():
                await db._let_go(held)
            return
        with contextlib.suppress(Exception):  # a connection that saw an error is closed
            await db._let_go(held)
        if isinstance(exc, Exception):
            with map_native_errors():
                raise exc


@dataclass
class Database:
    """An opened engine plus the locks and options each kind of operation uses.

    Attributes:
        engine: The SQLAlchemy async engine (transactions).
        dialect: ``"postgresql"`` or ``"sqlite"``.
    """

    engine: AsyncEngine
    dialect: Dialect
    _single: AsyncEngine
    _reader: AsyncEngine
    _write_lock: asyncio.Lock | None = None
    _every_lock: asyncio.Lock | None = None
    _held: list[tuple[AsyncConnection, Any]] = field(default_factory=list)
    _held_max: int = 0
    _compiled: Compiled | None = None
    _router: ReadRouter | None = None
    _lite: Compiled | None = None
    _lite_held: list[tuple[AsyncConnection, Any]] = field(default_factory=list)
    _prepared: weakref.WeakKeyDictionary[Any, Prepared] | None = None
    _runners: dict[Any, PgRunner] = field(default_factory=dict)
    sqlite_file: LiteFile | None = None
    _closed: bool = False

    @classmethod
    def create(
        cls, url: URL, *, schema: str | None = None, pool_size: int = 10, pooled: bool = False
    ) -> Database:
        """Build the engine for ``url`` (no I/O yet).

        Args:
            url: A normalized URL (see :func:`normalize_url`).
            schema: PostgreSQL only: the schema to use (``search_path``); it must exist.
            pool_size: Pooled connections kept open (PostgreSQL and SQLite files).
            pooled: PostgreSQL only: the URL reaches the server through a pooler in
                transaction mode (see :meth:`_create_pooled`).

        Raises:
            InvalidArgument: If ``schema`` is given for SQLite, or with ``pooled``.
        """
        if url.get_backend_name() == "sqlite":
            if schema is not None:
                raise InvalidArgument("the 'schema' option is for PostgreSQL only")
            return cls._create_sqlite(url, pool_size)
        keeps_statements = _keeps_statements(url)
        url, typed = _typed_connect_args(url)
        if pooled:
            return cls._create_pooled(url, schema, pool_size, typed)
        connect_args: dict[str, Any] = {"timeout": 10, **typed}
        if schema is not None:
            connect_args["server_settings"] = {"search_path": schema}
        engine = create_async_engine(
            url, pool_size=pool_size, max_overflow=pool_size, connect_args=connect_args
        )
        event.listen(engine.sync_engine, "checkout", _refuse_closed)
        auto = engine.execution_options(isolation_level="AUTOCOMMIT")
        return cls(
            engine=engine,
            dialect="postgresql",
            _single=auto,
            _reader=auto,
            _held_max=pool_size,
            _compiled=Compiled(engine.dialect),
            _prepared=weakref.WeakKeyDictionary() if keeps_statements else None,
        )

    @classmethod
    def _create_pooled(
        cls, url: URL, schema: str | None, pool_size: int, typed: dict[str, Any]
    ) -> Database:
        """PostgreSQL behind a transaction-mode pooler (PgBouncer ``pool_mode = transaction``).

        The pooler lends a server connection for one transaction, so nothing may outlive
        one: asyncpg's statement cache is off (``statement_cache_size=0``), SQLAlchemy's too
        (``prepared_statement_cache_size=0``) and its prepared statements get unique names
        (``prepared_statement_name_func``), as the SQLAlchemy asyncpg dialect documents for
        PgBouncer. Every operation, reads included, is a transaction (no ``AUTOCOMMIT``
        statements on kept connections, no direct asyncpg runner): a statement's Parse and
        its Bind then reach the same server connection.

        Raises:
            InvalidArgument: If ``schema`` is given: ``search_path`` is session state, which
                a transaction pooler does not keep (give the role a default search_path
                with ``ALTER ROLE ... SET search_path`` instead).
        """
        if schema is not None:
            msg = (
                "the 'schema' option sets search_path for the session, which a transaction "
                "pooler does not keep; give the role a default (ALTER ROLE name SET "
                "search_path = ...) or connect to a database of its own"
            )
            raise InvalidArgument(msg)
        connect_args: dict[str, Any] = {
            "timeout": 10,
            **typed,
            "statement_cache_size": 0,
            "prepared_statement_name_func": _unique_statement_name,
        }
        engine = create_async_engine(
            url.update_query_dict({"prepared_statement_cache_size": "0"}),
            pool_size=pool_size,
            max_overflow=pool_size,
            connect_args=connect_args,
        )
        return cls(engine=engine, dialect="postgresql", _single=engine, _reader=engine)

    @classmethod
    def _create_sqlite(cls, url: URL, pool_size: int) -> Database:
        memory = _is_memory(url)
        file = None if memory else LiteFile(str(url.database))
        if file is None:
            engine = create_async_engine(url, poolclass=StaticPool)
        else:
            engine = create_async_engine(url, pool_size=pool_size, max_overflow=pool_size)
            _pin(engine, file)
        event.listen(engine.sync_engine, "connect", _sqlite_connect)
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
        reader = engine.execution_options(**{_READ_OPTION: True})
        return cls(
            engine=engine,
            dialect="sqlite",
            _single=engine,
            _reader=reader,
            _write_lock=asyncio.Lock(),
            _every_lock=asyncio.Lock() if memory else None,
            _lite=Compiled(engine.dialect),
            _held_max=0 if memory else pool_size,
            sqlite_file=file,
        )

    @asynccontextmanager
    async def _enter(
        self, engine: AsyncEngine, *, transaction: bool, write: bool, conflict: str | None = None
    ) -> AsyncIterator[AsyncConnection]:
        with map_native_errors(conflict=conflict):
            async with AsyncExitStack() as stack:
                if self._every_lock is not None:
                    await stack.enter_async_context(self._every_lock)
                elif write and self._write_lock is not None:
                    await stack.enter_async_context(self._write_lock)
                # Checkout + BEGIN and COMMIT/ROLLBACK + check-in run to completion even if
                # the caller is cancelled mid-way: nothing stays locked (issue 12).
                if transaction:
                    yield await enter_whole(stack, engine.begin())
                else:
                    yield await enter_whole(stack, engine.connect())
            if self._closed:  # an operation that outlived dispose(): see _let_go
                await complete(self.engine.dispose())

    @asynccontextmanager
    async def _autocommit(self) -> AsyncIterator[tuple[AsyncConnection, Any]]:
        """PostgreSQL: an ``AUTOCOMMIT`` connection kept checked out between operations.

        Yields the SQLAlchemy connection and its asyncpg connection. A pool checkout and
        check-in cost about as much client CPU as the statement itself (measured by
        ``bench/sql_bench.py``), so up to ``pool_size`` idle autocommit connections are kept
        here. Any exception discards the connection; a closed connection, or an exception
        that is neither an error reported by the server or SQLAlchemy nor one of ours (a
        lost connection, a cancellation mid-statement), invalidates it, since SQLAlchemy may
        not have seen what happened on the asyncpg connection. The next operation takes a
        fresh one.
        """
        with map_native_errors():
            held = await self._take_held()
            try:
                yield held
            except BaseException as exc:
                self._forget(held[1])
                with contextlib.suppress(Exception):
                    await complete(_discard(held, exc))
                raise
            await self._keep(held)

    async def _take_held(self) -> tuple[AsyncConnection, Any]:
        """Return a live held connection, or a fresh one.

        A held connection the server closed while it sat idle (``pg_terminate_backend``, a
        restart, an idle timeout) is known closed as soon as the event loop has read the
        server's goodbye: it is discarded here, for free, instead of failing the next
        statement with ``BackendUnavailable`` (issue 12).
        """
        while self._held:
            held = self._held.pop()
            if not held[1].is_closed():
                return held
            self._forget(held[1])
            with contextlib.suppress(Exception):
                await complete(_discard(held, ConnectionError("closed by the server")))
        return await self._checkout()

    async def _connect(self) -> AsyncConnection:
        return await self._single.connect()

    async def _checkout(self) -> tuple[AsyncConnection, Any]:
        conn = await finish(self._connect())  # a cancelled checkout is not leaked
        try:
            driver = (await conn.get_raw_connection()).driver_connection
        except BaseException:
            await complete(conn.close())
            raise
        return conn, driver

    @asynccontextmanager
    async def _conn_only(self) -> AsyncIterator[AsyncConnection]:
        async with self._autocommit() as (conn, _):
            yield conn

    def _runner(
        self, engine: AsyncEngine, *, transaction: bool, write: bool
    ) -> AbstractAsyncContextManager[Runner]:
        if self._compiled is not None:
            return _HeldRunner(self)
        return self._sa_runner(engine, transaction=transaction, write=write)

    @asynccontextmanager
    async def _sa_runner(
        self, engine: AsyncEngine, *, transaction: bool, write: bool
    ) -> AsyncIterator[Runner]:
        if self._lite is not None and not write:
            async with self.sqlite_driver(write=False) as sqlite_driver:
                yield LiteRunner(sqlite_driver, self._lite)
        else:
            async with self._enter(engine, transaction=transaction, write=write) as conn:
                yield Runner(conn)

    def _statements_of(self, driver: Any) -> Prepared | None:
        """The prepared statements kept on one asyncpg connection (``None``: none are kept)."""
        prepared = self._prepared
        if prepared is None:
            return None
        kept = prepared.get(driver)
        if kept is None:
            kept = prepared[driver] = {}
        return kept

    def _runner_of(self, held: tuple[AsyncConnection, Any]) -> PgRunner:
        """The :class:`PgRunner` of a held connection, made at its first use and kept.

        A runner holds nothing of one operation (the connection, the compiled statements,
        the connection's kept statements), so a held connection keeps one; it is dropped
        when the connection is given back or closed (:meth:`_forget`).
        """
        runner = self._runners.get(held[1])
        if runner is None or runner.conn is not held[0]:
            assert self._compiled is not None
            runner = PgRunner(held[0], held[1], self._compiled, self._statements_of(held[1]))
            self._runners[held[1]] = runner
        return runner

    def _forget(self, driver: Any) -> None:
        """Drop the runner of an asyncpg connection that is given back or closed.

        Its kept statements stay (``_prepared``): a connection given back to the pool
        keeps them on the server and finds them again at its next checkout.
        """
        self._runners.pop(driver, None)

    async def _keep(self, held: tuple[AsyncConnection, Any]) -> None:
        """Hold a connection after a successful operation, or close it past ``pool_size``."""
        if len(self._held) < self._held_max:
            self._held.append(held)
        else:
            await self._let_go(held)

    async def _let_go(self, held: tuple[AsyncConnection, Any]) -> None:
        """Close a connection that is not kept; after :meth:`dispose`, close its pool too.

        An operation still running when the store closed (``Store.close`` does not wait
        for them) gives its connection back after ``dispose``: kept or pooled, it would
        stay open, unowned, and be collected with a "non-checked-in connection" warning
        and a live SQLite thread. After ``dispose`` nothing is kept (``_held_max`` is 0)
        and the connection is invalidated (closed for real) before it goes back.
        """
        self._forget(held[1])
        if self._closed:  # closes the driver's connection, not only the pool's handle
            await complete(held[0].invalidate())
        await complete(held[0].close())

    @asynccontextmanager
    async def sqlite_driver(
        self, *, write: bool, conflict: str | None = None
    ) -> AsyncIterator[Any]:
        """SQLite: a pooled connection's ``aiosqlite.Connection``, for one operation.

        Taken as :meth:`write` (``write=True``: behind the writer lock) or :meth:`read`
        takes its connection, without any ``BEGIN`` (``threadkeep_sql._lite`` issues its
        own); native errors are mapped (``map_native_errors``, a unique violation to
        ``Conflict(conflict)`` when ``conflict`` is given). Connections stay checked out
        between operations (up to ``pool_size``); one that saw an error is closed.
        """
        if self._every_lock is not None:  # ":memory:": the one shared connection, locked
            shared = self._enter(self.engine, transaction=False, write=write, conflict=conflict)
            async with shared as conn:
                yield (await conn.get_raw_connection()).driver_connection
            return
        lock = self._write_lock if write else None
        with map_native_errors(conflict=conflict):
            if lock is not None:
                await lock.acquire()
            try:
                held = self._lite_held.pop() if self._lite_held else await self._checkout()
                try:
                    yield held[1]
                except BaseException:
                    with contextlib.suppress(Exception):
                        await self._let_go(held)
                    raise
                if len(self._lite_held) < self._held_max:
                    self._lite_held.append(held)
                else:
                    await self._let_go(held)
            finally:
                if lock is not None:
                    lock.release()

    @property
    def sqlite_compiled(self) -> Compiled:
        """SQLite: the driver's statements compiled once for the SQLite dialect.

        Raises:
            RuntimeError: On PostgreSQL (a bug in the caller).
        """
        if self._lite is None:
            raise RuntimeError("sqlite_compiled is for SQLite only")
        return self._lite

    @property
    def has_raw_driver(self) -> bool:
        """Whether :meth:`raw_transaction` works.

        True on PostgreSQL, except behind a transaction pooler (whose mode turns the prepared
        asyncpg path off).
        """
        return self._compiled is not None

    @asynccontextmanager
    async def raw_transaction(self) -> AsyncIterator[Any]:
        """PostgreSQL: a transaction on a pooled asyncpg connection, for bulk statements.

        Yields the asyncpg connection inside ``connection.transaction()`` (committed when
        the block ends, rolled back on an exception); what ``COPY``
        (``copy_records_to_table``) needs and SQLAlchemy has no API for. Native errors are
        mapped as everywhere else (``map_native_errors``).

        Raises:
            RuntimeError: On SQLite (a bug in the caller: use :meth:`transaction`).
        """
        if self._compiled is None:
            raise RuntimeError("raw_transaction is for PostgreSQL only")
        async with self._autocommit() as (_conn, driver), driver.transaction():
            yield driver

    def runner(self, *, write: bool = False) -> AbstractAsyncContextManager[Runner]:
        """Return an async context manager giving a :class:`Runner` for one operation.

        ``write=False``: reads, as :meth:`read`; ``write=True``: self-atomic write
        statements, as :meth:`write`. PostgreSQL runs the statements on asyncpg directly
        (see :mod:`threadkeep_sql._runner`); SQLite reads run each statement in one hop
        on the connection's thread (:class:`~threadkeep_sql._lite.LiteRunner`), SQLite
        writes through SQLAlchemy.
        """
        if self._router is None and self._compiled is not None:
            return _HeldRunner(self)  # PostgreSQL without a standby: what the calls below give
        if write:
            return self._noted(self._runner(self.engine, transaction=True, write=True))
        if self._router is not None:
            return self._router.route(Database.read_runner_here)
        return self.read_runner_here()

    def read_runner_here(self) -> AbstractAsyncContextManager[Runner]:
        """Like ``runner()`` for reads, but always on this database (never a read replica)."""
        if self._lite is not None and self._every_lock is None:
            return _LiteRead(self)
        return self._runner(self._reader, transaction=False, write=False)

    def read(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """Return an async context manager giving a connection for reads.

        With a read replica (:meth:`route_reads`) it may be a connection to the standby.
        """
        if self._router is not None:
            return self._router.route(Database.read_here)
        return self.read_here()

    def read_here(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """Like :meth:`read`, but always on this database (never a read replica)."""
        if self._compiled is not None:
            return self._conn_only()
        return self._enter(self._reader, transaction=False, write=False)

    def write(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """Return an async context manager for one self-atomic write statement."""
        if self._compiled is not None:
            return self._noted(self._conn_only())
        return self._noted(self._enter(self.engine, transaction=True, write=True))

    def transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """Return an async context manager for an all-or-nothing group of statements."""
        return self._noted(self._enter(self.engine, transaction=True, write=True))

    def route_reads(self, standby: Database, wait: float, *, strong: bool = True) -> ReadRouter:
        """Send this database's reads to ``standby`` from now on (see :mod:`._replica`).

        Args:
            standby: The streaming-replication standby's database.
            wait: Seconds a fenced read waits for the standby to replay what it must see.
            strong: Fence every read, not only those after this store's writes.

        Returns:
            The router (its counters say where reads went).
        """
        self._router = ReadRouter(self, standby, wait, strong=strong)
        return self._router

    def _noted(self, operation: AbstractAsyncContextManager[T]) -> AbstractAsyncContextManager[T]:
        """Return ``operation``, recording its end for read-your-writes if reads are routed."""
        return operation if self._router is None else self._router.noting(operation)

    async def dispose(self) -> None:
        """Close every pooled connection (the standby's too); never raises.

        Operations still running (``Store.close`` does not wait for them; writes run to
        their end, shielded) are waited for, up to :data:`DRAIN_SECONDS`, before the pool
        is closed: a connection given back to a closed pool would stay open, unowned, and
        be collected with a "non-checked-in connection" warning (and a live SQLite
        thread). What an operation checks out after that is closed when it gives it back
        (:meth:`_let_go`).
        """
        if self._router is not None:
            await self._router.standby.dispose()
        held, self._held = self._held + self._lite_held, []
        self._lite_held = []
        self._runners.clear()
        self._closed, self._held_max = True, 0  # what comes back later is closed (_let_go)
        try:
            with map_native_errors():
                if self.sqlite_file is not None and self.sqlite_file.moved():
                    with contextlib.suppress(Exception):  # the connections still get closed
                        await self._empty_stale_wal(held)
                for conn, _ in held:
                    await conn.close()
                await self._drain()
                await self.engine.dispose()
        except Exception:  # noqa: BLE001 - closing must not raise (Driver.close)
            return

    async def _empty_stale_wal(self, held: list[tuple[AsyncConnection, Any]]) -> None:
        """:func:`_empty_stale_wal` on a held connection, else on one from the pool.

        A write refused because the file went (``LiteFile.check``) gives its connection
        back to the pool rather than to the held list, and that is the usual way to get
        here (move the file, one write refused, close): the pool's idle connection still
        has the old file open. A new connection to the path is refused (``mode=rw``, the
        file's identity), so with no connection left to the old file nothing can be done.
        """
        if held:
            await _empty_stale_wal(held)
            return
        taken = await self._checkout()
        try:
            await _empty_stale_wal([taken])
        finally:
            await complete(taken[0].close())

    async def _drain(self) -> None:
        """Wait until no pooled connection is checked out, or :data:`DRAIN_SECONDS` passed."""
        pool = self.engine.pool
        checked_out = getattr(pool, "checkedout", None)  # QueuePool only
        if checked_out is None or checked_out() == 0:
            return
        returned = asyncio.Event()

        def checkin(_dbapi_connection: Any, _record: Any) -> None:
            returned.set()

        event.listen(pool, "checkin", checkin)
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                while checked_out() > 0:
                    returned.clear()
                    await returned.wait()
        except TimeoutError:
            return  # an operation that hangs must not make close() hang too
        finally:
            event.remove(pool, "checkin", checkin)


class _HeldRunner:
    """``Database.runner`` on PostgreSQL: a :class:`PgRunner` on a held connection.

    Exactly ``Database._autocommit`` around the runner (a held ``AUTOCOMMIT`` connection,
    kept again after success, discarded after any exception; native errors mapped), as
    one class: the two nested generator context managers cost several microseconds of
    every read.
    """

    __slots__ = ("_db", "_held")

    def __init__(self, db: Database) -> None:
        self._db = db
        self._held: tuple[AsyncConnection, Any] | None = None

    async def __aenter__(self) -> PgRunner:
        db = self._db
        idle = db._held
        if idle and not idle[-1][1].is_closed():  # the usual case, without a coroutine
            held = self._held = idle.pop()
        else:
            with map_native_errors():
                held = self._held = await db._take_held()
        return db._runner_of(held)

    async def __aexit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        held = self._held
        assert held is not None
        self._held = None
        if exc is None:
            db = self._db
            if len(db._held) < db._held_max:  # Database._keep, without a coroutine
                db._held.append(held)
                return
            with map_native_errors():
                await db._let_go(held)
            return
        self._db._forget(held[1])
        with contextlib.suppress(Exception):
            await complete(_discard(held, exc))
        if isinstance(exc, Exception):
            with map_native_errors():  # the error the block raised, mapped as _autocommit maps it
                raise exc
