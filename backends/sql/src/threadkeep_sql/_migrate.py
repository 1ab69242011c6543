"""Create or migrate the schema through Alembic's API, with no ``alembic.ini``.

``SqlStore.open`` calls :func:`upgrade_to_head` on a connection inside a write transaction.
On PostgreSQL a transaction-scoped advisory lock makes concurrent openers of a fresh database
take turns (the second finds the schema at head and does nothing); on SQLite the write
transaction (``BEGIN IMMEDIATE``) does the same. Reopening a migrated store is a no-op.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

__all__ = [
    "MIGRATIONS_DIR",
    "current_revision",
    "head_revision",
    "lock_schema",
    "upgrade_to_head",
]

MIGRATIONS_DIR = Path(__file__).parent / "_migrations"
"""The Alembic script directory shipped inside the package."""

_VERSION_TABLE = "threadkeep_alembic_version"
_ADVISORY_LOCK_KEY = 0x74686B70  # "thkp": serializes concurrent migrations on PostgreSQL


def _config(connection: Connection, partitions: int | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    config.attributes["partitions"] = partitions  # read by revision 0005
    return config


def head_revision() -> str | None:
    """Return the newest revision the shipped scripts define."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(config).get_current_head()


def current_revision(connection: Connection) -> str | None:
    """Return the revision the database is at, or ``None`` for an empty database."""
    context = MigrationContext.configure(connection, opts={"version_table": _VERSION_TABLE})
    return context.get_current_revision()


def lock_schema(connection: Connection) -> None:
    """PostgreSQL: wait for, then hold until commit, the lock that orders schema changes."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_LOCK_KEY})


def upgrade_to_head(connection: Connection, partitions: int | None = None) -> None:
    """Bring the schema on ``connection`` to the head revision (idempotent).

    Args:
        connection: A synchronous connection inside a transaction (``run_sync``).
        partitions: PostgreSQL: hash partitions of the per-chat tables, applied if the
            schema passes revision 0005 now (a new store); ``None`` for plain tables.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: If the DDL fails (the caller maps it).
    """
    lock_schema(connection)
    if current_revision(connection) == head_revision():
        return
    command.upgrade(_config(connection, partitions), "head")
