"""Alembic environment for threadkeep-sql, driven programmatically by ``SqlStore.open``.

``threadkeep_sql._migrate.upgrade`` passes an open synchronous connection (inside a
transaction) in ``config.attributes["connection"]``; no ``alembic.ini`` is needed. In offline
mode (``threadkeep migrate --sql``) ``config.attributes["offline_dialect"]`` names the
dialect and the DDL goes to the config's output buffer. To write a
new revision during development::

    alembic -c /dev/null -x ... revision   # or copy versions/0001_initial.py and edit it
"""

from __future__ import annotations

from alembic import context

from threadkeep_sql._schema import metadata

VERSION_TABLE = "threadkeep_alembic_version"

connection = context.config.attributes.get("connection")
if context.is_offline_mode():  # `threadkeep migrate --sql`: DDL text, no database
    dialect = context.config.attributes["offline_dialect"]
    context.configure(
        dialect_name=dialect,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
        render_as_batch=dialect == "sqlite",
    )
elif connection is None:  # pragma: no cover - only through SqlStore.open / threadkeep migrate
    raise RuntimeError("threadkeep_sql migrations run through SqlStore.open(), not the alembic CLI")
else:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
    )
with context.begin_transaction():
    context.run_migrations()
