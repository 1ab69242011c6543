"""Schema upgrades as a driver offers them: ``Store.schema_migrations()`` and what it returns.

A driver whose storage has a versioned schema (the SQL driver: Alembic revisions) returns a
:class:`SchemaMigrations` from ``Store.schema_migrations()``; drivers without one (memory,
MongoDB, the memory service) return ``None``. ``threadkeep migrate`` is built on it, and
so can a deployment script be: the object works on an unopened store, since a store whose
schema is outdated cannot be opened with ``auto_migrate=False``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["SchemaMigrations", "SchemaRevision"]


@dataclass(frozen=True)
class SchemaRevision:
    """One revision of a driver's schema.

    Attributes:
        revision: Its id (for the SQL driver, the Alembic revision, for example ``"0003"``).
        down_revision: The revision it upgrades from (``None`` for the first one).
        description: What it changes, one line.
    """

    revision: str
    down_revision: str | None
    description: str


@runtime_checkable
class SchemaMigrations(Protocol):
    """The schema upgrades of one store's database (connects on each call, then lets go).

    Every method raises ``BackendUnavailable`` when the database cannot be reached, and
    ``SchemaOutdated`` when it is at a revision this code does not know.
    """

    @property
    def target(self) -> str:
        """The database, for messages (its URL with any password masked)."""
        ...

    def history(self) -> list[SchemaRevision]:
        """Return every revision this code knows, oldest first (the last one is the head)."""
        ...

    async def current(self) -> str | None:
        """Return the revision the database is at (``None``: no schema yet)."""
        ...

    async def upgrade(self) -> tuple[str | None, str | None]:
        """Bring the schema to the newest revision (a no-op when it is there already).

        Returns:
            ``(revision before, revision after)``.
        """
        ...

    async def upgrade_sql(self) -> str:
        """Return the DDL :meth:`upgrade` would run, without running it (``""`` if none)."""
        ...
