"""``SqlMigrations``: the Alembic revisions of one store's database, for ``threadkeep migrate``.

It works on an unopened ``SqlStore`` (one opened with ``auto_migrate=False`` cannot open
while its schema is outdated) and connects for each call, then lets go: current revision,
the shipped history, the upgrade itself, or the DDL the upgrade would run (Alembic's
offline mode, from the revision the database is at). Nothing here names a revision: the
head is whatever the shipped scripts define.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa

from threadkeep import SchemaRevision

from ._migrate import (
    check_known,
    current_revision,
    revision_history,
    upgrade_sql,
    upgrade_to_head,
)

if TYPE_CHECKING:
    from ._store import SqlDriver

__all__ = ["SqlMigrations"]

T = TypeVar("T")


class SqlMigrations:
    """The schema upgrades of a SQL store's database (a ``threadkeep.SchemaMigrations``).

    Args:
        store: The store (open or not); its URL, ``schema`` and pool options are used.
    """

    def __init__(self, store: SqlDriver) -> None:
        self._store = store

    @property
    def target(self) -> str:
        """The database, for messages (the store's URL with any password masked)."""
        return self._store.shown_url

    def history(self) -> list[SchemaRevision]:
        """Return every revision threadkeep-sql ships, oldest first (the last is the head)."""
        return revision_history()

    async def current(self) -> str | None:
        """Return the revision the database is at (``None``: no threadkeep schema yet).

        A SQLite file that does not exist is not created: it has no schema.

        Raises:
            BackendUnavailable: If the database cannot be reached.
            InvalidArgument: If the ``schema`` option names a schema that does not exist.
            SchemaOutdated: If the database is at a revision this code does not know.
        """
        if not self._exists():
            return None
        found = await self._run(current_revision, write=False)
        return check_known(found, upgrading=True)

    async def upgrade(self) -> tuple[str | None, str | None]:
        """Bring the schema to the newest revision, in one transaction (idempotent).

        Returns:
            ``(revision before, revision after)``.

        Raises:
            BackendUnavailable: If the database cannot be reached or the DDL fails (the
                user may not be allowed to run it).
            InvalidArgument: If the ``schema`` option names a schema that does not exist.
            SchemaOutdated: If the database is at a revision this code does not know.
        """

        def work(connection: sa.Connection) -> tuple[str | None, str | None]:
            before = current_revision(connection)
            upgrade_to_head(connection)
            return before, current_revision(connection)

        return await self._run(work, write=True)

    async def upgrade_sql(self) -> str:
        """Return the DDL :meth:`upgrade` would run now (``""`` when at the head).

        Reads the current revision (connecting), changes nothing.

        Raises:
            As :meth:`current`.
        """
        dialect = self._store._sa_url.get_backend_name()
        return upgrade_sql(dialect, await self.current(), self._store._schema)

    def _exists(self) -> bool:
        url = self._store._sa_url
        if url.get_backend_name() != "sqlite":
            return True
        database = url.database or ""
        return database != ":memory:" and Path(database).exists()

    async def _run(self, work: Callable[[sa.Connection], T], *, write: bool) -> T:
        db = await self._store._primary_database()
        try:
            return await self._store._in_schema(db, work, write=write)
        finally:
            await db.dispose()
