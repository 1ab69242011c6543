"""Hash-partition the per-chat tables by chat_id when the store asks for it (``partitions=N``).

A store opened with ``partitions=N`` (a ``SqlStore`` argument or ``?partitions=N`` in its URL)
passes ``N`` to Alembic (``config.attributes["partitions"]``); on PostgreSQL this revision
then rebuilds ``messages``, ``message_refs``, ``steps`` and ``runs`` as ``N`` hash partitions
of ``chat_id`` (``threadkeep_sql._partition``). Without the option, and on SQLite, it changes
nothing. A store already past this revision is converted with ``threadkeep-sql partition``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import context, op

from threadkeep_sql._partition import partition_tables

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Partition the per-chat tables if ``partitions`` was given (PostgreSQL only)."""
    partitions = context.config.attributes.get("partitions")
    bind = op.get_bind()
    if partitions and bind.dialect.name == "postgresql":
        partition_tables(bind, int(partitions))


def downgrade() -> None:
    """Nothing: a partitioned layout serves every query a plain one does."""
