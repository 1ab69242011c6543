"""``SqlStore``: the SQL driver (PostgreSQL through asyncpg, SQLite through aiosqlite).

Built on SQLAlchemy 2 Core (async), with the schema created and migrated by Alembic when the
store opens. See :mod:`threadkeep_sql._schema` for the tables and
:mod:`threadkeep_sql._engine` for how each operation reaches the database.

Scale path: every message read and write names its ``chat_id``, and every
page is a keyset walk on the primary key ``(chat_id, seq)``: ``WHERE chat_id = :c AND seq <
:before ORDER BY seq DESC LIMIT :n`` is one descent of that index whatever the depth, so a
page 500,000 messages deep costs what the first does (OFFSET would read and discard every
row before it). The same key is what makes messages partitionable without changing a query:
with ``partitions=N`` the per-chat tables are ``PARTITION BY HASH (chat_id)`` tables
(:mod:`threadkeep_sql._partition`), every primary key and unique index contains ``chat_id``,
and every per-chat statement prunes to one partition. ``read_url`` sends reads to a
streaming standby with read-your-writes (:mod:`threadkeep_sql._replica`); ``pooler`` makes
the driver work through a transaction-mode pooler (:class:`threadkeep_sql._engine.Database`).
The next steps, Citus with ``chat_id`` as the distribution column and the cold tier on object
storage, are in ``docs/scaling.md``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import asyncpg  # type: ignore[import-untyped]
import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection

from threadkeep import BackendUnavailable, Capabilities, InvalidArgument, StorageReadOnly, Store
from threadkeep.driver import store_for

from ._archive import ArchiveMixin
from ._chats import ChatsMixin
from ._commit import CommitMixin
from ._engine import SCHEMES, Database, normalize_url
from ._errors import _chain
from ._group import GroupCommitter
from ._lite_paths import LiteMixin
from ._load import LoadMixin
from ._load_chats import LoadChatsMixin
from ._messages import _last_messages_statement
from ._migrate import outdated, require_head, upgrade_to_head
from ._options import ScaleOptions
from ._partition import partition_count
from ._previews import PreviewsMixin
from ._schema_admin import SqlMigrations

__all__ = ["SqlDriver", "SqlStore"]

T = TypeVar("T")


_SQLITE_HEADER = b"SQLite format 3\x00"


def _require_folder(database: str | None) -> None:
    """Fail clearly on a SQLite path sqlite3 would refuse with "unable to open" or "not a database".

    Raises:
        BackendUnavailable: If the file's folder does not exist.
        InvalidArgument: If the path is a directory, or a non-empty file that is not SQLite.
    """
    if database in (None, "", ":memory:"):
        return
    path = Path(str(database)).expanduser().absolute()
    if path.is_dir():
        msg = (
            f"the SQLite path {database!r} is a directory; name a file in it, for example "
            f"sqlite+aiosqlite:///{path / 'threadkeep.db'}"
        )
        raise InvalidArgument(msg)
    if path.is_file():
        with path.open("rb") as file:
            header = file.read(len(_SQLITE_HEADER))
        if header and header != _SQLITE_HEADER:
            msg = (
                f"{database!r} is not a SQLite database (it exists and holds something else); "
                "point the URL at a threadkeep SQLite file or at a path that does not exist yet"
            )
            raise InvalidArgument(msg)
    folder = path.parent
    if not folder.is_dir():
        msg = f"cannot open SQLite file {database!r}: folder {folder} does not exist"
        raise BackendUnavailable(msg + "; create it or choose another path")


def _login_problem(exc: BaseException, url: URL) -> str | None:
    """Say what PostgreSQL refused at login (wrong password, unknown role or database)."""
    where = f"{url.host or 'localhost'}:{url.port or 5432}"
    for item in _chain(exc):
        if isinstance(item, asyncpg.InvalidCatalogNameError):
            return (
                f"PostgreSQL database {url.database!r} does not exist on {where}; create it "
                f"(createdb {url.database} or CREATE DATABASE) or fix the database in the URL"
            )
        if isinstance(item, asyncpg.InvalidPasswordError):
            return (
                f"PostgreSQL refused the login of user {url.username!r} on {where} (wrong "
                "password, or no such user); fix the user or password in the URL "
                "(percent-encode special characters)"
            )
        if isinstance(item, asyncpg.InvalidAuthorizationSpecificationError):
            return (
                f"PostgreSQL refused user {url.username!r} for database {url.database!r} on "
                f"{where} ({str(item).strip()}); fix the user in the URL or the server's "
                "roles and pg_hba.conf"
            )
    return None


_SCHEMA_EXISTS = sa.text("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = :name)")


async def _require_schema(conn: AsyncConnection, schema: str) -> None:
    """Fail clearly when the ``schema`` option names a schema that does not exist."""
    if not (await conn.execute(_SCHEMA_EXISTS, {"name": schema})).scalar():
        msg = f"PostgreSQL schema {schema!r} does not exist; create it (CREATE SCHEMA) first"
        raise InvalidArgument(msg + " or leave out the 'schema' option")


def _require_partitions(connection: sa.Connection, wanted: int) -> None:
    """Fail clearly when ``partitions=N`` meets a store laid out otherwise."""
    found = partition_count(connection)
    if found != wanted:
        layout = "unpartitioned" if found == 0 else f"partitioned {found} ways"
        msg = (
            f"the store is {layout}, not {wanted} partitions; convert it with "
            f"`threadkeep-sql partition URL --partitions {wanted}` (docs/scaling.md) or "
            "leave out the partitions option"
        )
        raise InvalidArgument(msg)


class SqlDriver(
    LiteMixin, ChatsMixin, LoadMixin, LoadChatsMixin, CommitMixin, ArchiveMixin, PreviewsMixin
):
    """The threadkeep driver for PostgreSQL and SQLite (held by a ``threadkeep.Store``).

    URLs: ``sqlite+aiosqlite:///./threadkeep.db`` (a file, relative or absolute),
    ``sqlite+aiosqlite:///:memory:`` (private to the store, one shared connection),
    ``postgresql+asyncpg://user:password@host:5432/db``; ``sqlite://`` and ``postgresql://``
    are aliases that pick the same async drivers. ``open()`` creates or migrates the schema
    (Alembic, scripts shipped in the package) and is a no-op for a migrated database.

    Args:
        url: The store URL.
        schema: PostgreSQL only: the schema to keep the tables in, also given in the URL as
            ``?schema=NAME``. It must exist (``open`` raises ``InvalidArgument`` otherwise);
            default: the connection's ``search_path``.
        pool_size: Pooled connections (the pool may grow to twice this under load).
        partitions: PostgreSQL only (also ``?partitions=N``): a new store's per-chat tables
            are hash-partitioned by ``chat_id`` into ``N`` partitions (2 to 1024); an
            existing store with another layout raises ``InvalidArgument`` on ``open``
            (convert it with ``threadkeep-sql partition``). Default: what the store has.
        read_url: PostgreSQL only (also ``?read_url=URL``, percent-encoded): a streaming
            standby that serves reads (see :mod:`threadkeep_sql._replica`).
        read_wait: Seconds (0 to 60, default 1) a read waits for the standby to replay
            what it must see before it is sent to the primary (also ``?read_wait=``).
        read_consistency: ``"strong"`` (default; also ``?read_consistency=``): every read
            sees every write committed before it, from any process; ``"session"``: a
            caller sees its own writes, others' once the standby replays them.
        pooler: ``"transaction"`` (also ``?pooler=transaction``) when the URL (and
            ``read_url``) reach PostgreSQL through a transaction-mode pooler such as
            PgBouncer; it cannot be combined with ``schema``.
        **options: Nothing else: an unknown option is refused.

    Raises:
        InvalidArgument: If the URL's scheme is not served here, an option is invalid, or
            ``schema`` and ``?schema=`` disagree.
    """

    schemes: ClassVar[tuple[str, ...]] = tuple(SCHEMES)
    capabilities: ClassVar[Capabilities] = Capabilities(
        transactions=True,
        steps=True,
        archive=True,
        persistent=True,
        concurrent_processes=True,
        notes={
            "persistent": "not for sqlite+aiosqlite:///:memory:, which lives as long as the store",
            "concurrent_processes": "SQLite files: one writer at a time (WAL, busy timeout 30 s)",
        },
    )

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_size: int = 10,
        partitions: int | None = None,
        read_url: str | None = None,
        read_wait: float | None = None,
        read_consistency: str | None = None,
        pooler: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(url, **options)
        self._sa_url, self._scale = ScaleOptions.take(
            normalize_url(url),
            partitions=partitions,
            read_url=read_url,
            read_wait=read_wait,
            read_consistency=read_consistency,
            pooler=pooler,
        )
        in_url = self._sa_url.query.get("schema")
        if in_url is not None:
            if schema is not None and schema != in_url:
                msg = f"schema {schema!r} given twice, differently: ?schema={in_url!r} in the URL"
                raise InvalidArgument(msg)
            schema = str(in_url)
            self._sa_url = self._sa_url.difference_update_query(["schema"])
        self._schema = schema
        self._pool_size = pool_size
        self._database(self._sa_url)  # validate options

    def _database(self, url: URL) -> Database:
        pooled = self._scale.pooler is not None
        return Database.create(url, schema=self._schema, pool_size=self._pool_size, pooled=pooled)

    async def _open(self) -> None:
        if not self.auto_migrate and await asyncio.to_thread(self._sqlite_file_missing):
            raise outdated(self.shown_url, None)  # a store that may not migrate creates nothing
        self._db = await self._primary_database()
        if self._scale.read_url is not None:
            standby = self._database(self._scale.read_url)
            strong = self._scale.read_consistency == "strong"
            self._db.route_reads(standby, self._scale.read_wait, strong=strong)
        self._last_messages_sql = _last_messages_statement(self._db.dialect)
        if self._db.dialect == "postgresql":
            self._group = GroupCommitter(self._append_call, partial(self._db.runner, write=True))
        try:
            await self._prepare(self._db)
        except BaseException:
            await self._db.dispose()
            raise

    async def _prepare(self, db: Database) -> None:
        """Create or migrate the schema; on read-only SQLite storage, check it instead.

        A SQLite file this process may not write (a read-only file, folder or mount) opens
        for reads when its schema is at the head (every write then raises
        ``StorageReadOnly``); with an older schema the ``StorageReadOnly`` of the upgrade
        is raised.
        """
        try:
            await self._in_schema(db, self._prepare_schema, write=True)
        except StorageReadOnly:
            if db.dialect != "sqlite":
                raise
            await self._in_schema(db, partial(require_head, target=self.shown_url), write=False)

    def _prepare_schema(self, connection: sa.Connection) -> None:
        if self.auto_migrate:
            upgrade_to_head(connection, partitions=self._scale.partitions)
        else:
            require_head(connection, self.shown_url)
        if self._scale.partitions is not None:
            _require_partitions(connection, self._scale.partitions)

    @property
    def writes_run_whole(self) -> frozenset[str]:  # type: ignore[override]
        """The write primitives that run whole by themselves (no shielded task in core).

        PostgreSQL: ``insert_messages`` (``_insert_any``). SQLite: ``commit_run``, whose
        transaction is one function on the connection's thread, awaited to its end
        (``_lite.run_on_thread``); what comes before it (the writer lock, the checkout)
        writes nothing and hands back what it took when cancelled.
        """
        if self._sa_url.get_backend_name() == "postgresql":
            return frozenset({"insert_messages"})
        return frozenset({"commit_run"})

    @property
    def shown_url(self) -> str:
        """The store's URL for messages: as given, with any password masked."""
        return sa.make_url(self.url).render_as_string(hide_password=True)

    def schema_migrations(self) -> SqlMigrations:
        """Return the Alembic revisions of this store's database (``threadkeep migrate``).

        Works on an unopened store; each call connects and lets go again.
        """
        return SqlMigrations(self)

    async def _primary_database(self) -> Database:
        """Build the primary's engine (the folder of a SQLite file must exist); no connection."""
        if self._sa_url.get_backend_name() == "sqlite":
            await asyncio.to_thread(_require_folder, self._sa_url.database)
        return self._database(self._sa_url)

    def _sqlite_file_missing(self) -> bool:
        """Whether the store is a SQLite file that does not exist (connecting creates it)."""
        if self._sa_url.get_backend_name() != "sqlite":
            return False
        database = self._sa_url.database or ""
        return database not in ("", ":memory:") and not Path(database).expanduser().exists()

    async def _in_schema(
        self, db: Database, work: Callable[[sa.Connection], T], *, write: bool
    ) -> T:
        """Run ``work`` on a synchronous connection in the store's schema (``run_sync``).

        ``write=True``: inside one write transaction (``BEGIN IMMEDIATE`` on SQLite).

        Raises:
            InvalidArgument: If the ``schema`` option names a schema that does not exist.
            BackendUnavailable: If the database cannot be reached (a refused login names
                the user, database and server).
        """
        try:
            async with db.transaction() if write else db.read() as conn:
                if self._schema is not None:
                    await _require_schema(conn, self._schema)
                return await conn.run_sync(work)
        except BackendUnavailable as exc:
            problem = _login_problem(exc, self._sa_url)
            if problem is None:
                raise
            raise BackendUnavailable(problem) from exc

    async def _close(self) -> None:
        if self._group is not None:
            await self._group.close()
        await self._db.dispose()


def SqlStore(url: str, **options: Any) -> Store:  # noqa: N802 - the documented factory
    """Return an unopened ``Store`` holding a :class:`SqlDriver` for ``url``.

    Args:
        url: As for :class:`SqlDriver`.
        **options: The options of :class:`threadkeep.Store` (``cursor_secret``, ``clock``,
            ``max_message_bytes``, ``message_model``, ``chat_model``, ``auto_migrate``...)
            and those of :class:`SqlDriver` (``schema``, ``pool_size``, ``partitions``...).

    Returns:
        The store; its driver is ``store.driver``.

    Raises:
        InvalidArgument: If the URL or an option is invalid.
    """
    return store_for(SqlDriver, url, **options)
