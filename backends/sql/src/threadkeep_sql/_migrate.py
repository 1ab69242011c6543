"""Create or migrate the schema through Alembic's API, with no ``alembic.ini``.

``SqlStore.open`` calls :func:`upgrade_to_head` on a connection inside a write transaction
(or :func:`require_head` when opened with ``auto_migrate=False``).
On PostgreSQL a transaction-scoped advisory lock makes concurrent openers of a fresh database
take turns (the second finds the schema at head and does nothing); on SQLite the write
transaction (``BEGIN IMMEDIATE``) does the same. Reopening a migrated store is a no-op.
"""

from __future__ import annotations

import functools
import io
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from threadkeep import SchemaOutdated, SchemaRevision

__all__ = [
    "MIGRATIONS_DIR",
    "check_known",
    "current_revision",
    "head_revision",
    "lock_schema",
    "outdated",
    "require_head",
    "revision_history",
    "upgrade_sql",
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


@functools.cache
def _scripts() -> ScriptDirectory:
    # The shipped scripts do not change while the process runs: parse them once (each
    # parse reads and compiles every revision file, about 10 ms of CPU per store open).
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(config)


def head_revision() -> str | None:
    """Return the newest revision the shipped scripts define."""
    return _scripts().get_current_head()


def revision_history() -> list[SchemaRevision]:
    """Return every shipped revision, oldest first (the last one is the head)."""
    found = [
        SchemaRevision(
            revision=str(script.revision),
            down_revision=None if script.down_revision is None else str(script.down_revision),
            description=(script.doc or "").strip().splitlines()[0] if script.doc else "",
        )
        for script in _scripts().walk_revisions()
    ]
    return found[::-1]


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
        SchemaOutdated: If the database is at a revision this code does not know.
        sqlalchemy.exc.SQLAlchemyError: If the DDL fails (the caller maps it).
    """
    lock_schema(connection)
    if check_known(current_revision(connection), upgrading=True) == head_revision():
        return
    command.upgrade(_config(connection, partitions), "head")


def check_known(current: str | None, *, upgrading: bool) -> str | None:
    """Return ``current`` if this code knows it (or it is ``None``: no schema yet).

    Raises:
        SchemaOutdated: If the database is at a revision the shipped scripts do not define
            (a newer threadkeep-sql migrated it): upgrade the package, never the schema.
    """
    if current is None or current in {r.revision for r in revision_history()}:
        return current
    head = head_revision()
    what = "upgrade" if upgrading else "open"
    msg = (
        f"the database schema is at revision {current!r}, which this threadkeep-sql does not "
        f"know (its newest is {head!r}): a newer threadkeep-sql migrated it; install that "
        f"version to {what} this store"
    )
    raise SchemaOutdated(msg, current=current, required=head)


def require_head(connection: Connection, target: str) -> None:
    """Check, without changing anything, that the schema is at the head revision.

    Args:
        connection: A synchronous connection (``run_sync``).
        target: The store's URL as messages show it (password masked).

    Raises:
        SchemaOutdated: If the schema is missing, older than the head (the message names
            ``threadkeep migrate``), or at a revision this code does not know.
    """
    current = check_known(current_revision(connection), upgrading=False)
    if current != head_revision():
        raise outdated(target, current)


def outdated(target: str, current: str | None) -> SchemaOutdated:
    """Return the error of a store opened with ``auto_migrate=False`` below the head.

    Args:
        target: The store's URL as messages show it (password masked).
        current: The revision the database is at (``None``: no schema, or no SQLite file).
    """
    head = head_revision()
    where = "has no threadkeep schema yet" if current is None else f"is at revision {current!r}"
    msg = (
        f"the database schema of {target} {where}; this threadkeep-sql needs revision {head!r} "
        f"and was opened with auto_migrate=False: upgrade it with `threadkeep migrate --url "
        f"'{target}'` (as a user allowed to run DDL; `--sql` prints the DDL instead)"
    )
    return SchemaOutdated(msg, current=current, required=head)


def upgrade_sql(dialect: str, current: str | None, schema: str | None) -> str:
    """Return the DDL that brings a schema at ``current`` to the head, without a database.

    Args:
        dialect: ``"postgresql"`` or ``"sqlite"``.
        current: The revision the database is at (``None``: none yet, so all of it).
        schema: PostgreSQL only: the schema the tables live in (a ``SET search_path``
            comes first).

    Returns:
        The SQL text (Alembic's offline mode, literal values), ``""`` when at the head.

    Raises:
        SchemaOutdated: If ``current`` is a revision this code does not know.
    """
    if check_known(current, upgrading=True) == head_revision():
        return ""
    buffer = io.StringIO()
    config = Config(output_buffer=buffer)
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["offline_dialect"] = dialect
    command.upgrade(config, "head" if current is None else f"{current}:head", sql=True)
    prelude = f'SET search_path TO "{schema}";\n\n' if schema is not None else ""
    return prelude + buffer.getvalue()
