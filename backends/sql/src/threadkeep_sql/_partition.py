"""Hash partitioning of the per-chat tables by ``chat_id`` (PostgreSQL, ``partitions=N``).

:func:`partition_tables` rebuilds ``messages``, ``message_refs``, ``steps`` and ``runs`` as
``PARTITION BY HASH (chat_id)`` tables of ``N`` partitions (``<table>_p<i>_of_<N>``, ``FOR
VALUES WITH (MODULUS N, REMAINDER i)``), moving their rows. Migration ``0005`` runs it on a
new, empty schema when the store is opened with ``partitions=N``; ``threadkeep-sql
partition`` runs it on an existing store (unpartitioned, or partitioned with another N).

The rule PostgreSQL imposes on a partitioned table (and Citus on a distributed one): every
primary key and unique index contains the partition key. Indexes are rebuilt from the
catalog, so whatever index a later migration adds is kept; a primary key or unique index
without ``chat_id`` gets ``chat_id`` appended: ``messages.message_id`` becomes unique per
chat (``(message_id, chat_id)``; message ids are UUIDv4, and a lookup by id still walks that
index's leading column in each partition) and ``steps`` is keyed ``(step_id, chat_id)``.
``chats`` (one row per chat, looked up by chat and by user), ``archived_ids`` (keyed by item
id) and ``settings`` stay plain tables.

Every per-chat statement of the driver names ``chat_id = ...``, so PostgreSQL prunes it to
one partition (at plan time with the value known, at executor start for a generic prepared
plan); ``backends/sql/tests/test_partitions.py`` checks this from ``EXPLAIN``.

Everything runs in the caller's transaction, under ``ACCESS EXCLUSIVE`` locks on the five
tables: concurrent writers wait, and a failure leaves the store as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy import Connection

__all__ = ["PARTITIONED_TABLES", "partition_count", "partition_tables"]

PARTITIONED_TABLES = ("messages", "message_refs", "steps", "runs")
"""The per-chat tables that are partitioned (each has a ``chat_id`` column)."""

PARTITION_KEY = "chat_id"

_COUNT = sa.text(
    """
    SELECT CASE WHEN pt.partrelid IS NULL THEN 0 ELSE (
             SELECT count(*) FROM pg_inherits i WHERE i.inhparent = pt.partrelid) END
      FROM (SELECT to_regclass(:table) AS oid) AS t
      LEFT JOIN pg_partitioned_table pt ON pt.partrelid = t.oid
    """
)
_INDEXES = sa.text(
    """
    SELECT c.relname, x.indisprimary, x.indisunique, con.conname,
           ARRAY(SELECT pg_get_indexdef(x.indexrelid, k, true)
                   FROM generate_series(1, x.indnkeyatts) AS k ORDER BY k) AS columns,
           pg_get_expr(x.indpred, x.indrelid, true) AS predicate
      FROM pg_index x
      JOIN pg_class c ON c.oid = x.indexrelid
      LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid AND con.conrelid = x.indrelid
     WHERE x.indrelid = to_regclass(:table)
     ORDER BY x.indisprimary DESC, c.relname
    """
)


@dataclass(frozen=True)
class _Index:
    name: str
    primary: bool
    unique: bool
    constraint: str | None
    columns: tuple[str, ...]
    predicate: str | None

    def keyed(self) -> tuple[str, ...]:
        """The columns, with the partition key appended to a key that lacks it."""
        if (self.primary or self.unique) and PARTITION_KEY not in self.columns:
            return (*self.columns, PARTITION_KEY)
        return self.columns

    def create(self, table: str) -> str:
        """The DDL that rebuilds this index on ``table``."""
        columns = ", ".join(self.keyed())
        if self.primary:
            return f'ALTER TABLE {table} ADD CONSTRAINT "{self.name}" PRIMARY KEY ({columns})'
        unique = "UNIQUE " if self.unique else ""
        where = f" WHERE {self.predicate}" if self.predicate else ""
        return f'CREATE {unique}INDEX "{self.name}" ON {table} ({columns}){where}'


def partition_count(connection: Connection, table: str = "messages") -> int:
    """Return how many hash partitions ``table`` has (0: a plain table, or no such table)."""
    return int(connection.execute(_COUNT, {"table": table}).scalar() or 0)


def partition_tables(connection: Connection, partitions: int) -> dict[str, int]:
    """Rebuild the per-chat tables as ``partitions`` hash partitions of ``chat_id``.

    Args:
        connection: A synchronous PostgreSQL connection inside a transaction, on the
            store's schema (``search_path``).
        partitions: The number of partitions (2 or more).

    Returns:
        The rows moved, per table (``{}`` when the tables already have that many
        partitions: nothing is done).

    Raises:
        ValueError: If ``partitions`` is below 2.
        sqlalchemy.exc.SQLAlchemyError: If the DDL fails (nothing is changed; the caller
            maps the error).
    """
    if partitions < 2:
        raise ValueError(f"partitions must be 2 or more, not {partitions}")
    if all(partition_count(connection, t) == partitions for t in PARTITIONED_TABLES):
        return {}
    names = ", ".join(("chats", *PARTITIONED_TABLES))
    connection.execute(sa.text(f"LOCK TABLE {names} IN ACCESS EXCLUSIVE MODE"))
    moved: dict[str, int] = {}
    ddl: list[str] = []
    for table in PARTITIONED_TABLES:
        count = connection.execute(sa.text(f"SELECT count(*) FROM {table}"))  # noqa: S608
        moved[table] = int(count.scalar() or 0)  # the tables are locked: the copy moves these
        ddl += _rebuild(connection, table, partitions)
    # One round trip for the whole rebuild (a new store runs this on every first open).
    connection.exec_driver_sql(f"DO $threadkeep$ BEGIN {'; '.join(ddl)}; END $threadkeep$")
    return moved


def _rebuild(connection: Connection, table: str, partitions: int) -> list[str]:
    """Return the DDL that moves ``table`` into a new partitioned table of the same name."""
    old = f"{table}_before_partitioning"
    indexes = [_Index(*row) for row in connection.execute(_INDEXES, {"table": table}).all()]
    ddl = [f"ALTER TABLE {table} RENAME TO {old}"]
    for index in indexes:  # free the names for the new table's indexes
        if index.constraint is not None:
            ddl.append(f'ALTER TABLE {old} DROP CONSTRAINT "{index.constraint}"')
        else:
            ddl.append(f'DROP INDEX "{index.name}"')
    ddl.append(
        f"CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
        f"INCLUDING STORAGE) PARTITION BY HASH ({PARTITION_KEY})"
    )
    ddl += [
        f"CREATE TABLE {table}_p{remainder}_of_{partitions} PARTITION OF {table} "
        f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
        for remainder in range(partitions)
    ]
    ddl.append(f"INSERT INTO {table} SELECT * FROM {old}")  # noqa: S608 - our own names
    # After the copy: one sorted build per index, not row by row.
    ddl += [index.create(table) for index in indexes]
    ddl.append(f"DROP TABLE {old}")
    return ddl
