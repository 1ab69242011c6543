"""``threadkeep-sql``: maintenance commands of the SQL driver (a console script).

``threadkeep-sql partition URL --partitions N`` converts an existing PostgreSQL store to
``N`` hash partitions of ``chat_id`` (unpartitioned, or partitioned another way), in one
transaction (see :mod:`threadkeep_sql._partition`): writers wait for it, readers of the
moved tables too, and a failure changes nothing. It prints the rows moved per table. Stop
the application's writers first: converting a large store holds the tables for as long as
copying them takes (about 1 minute per million messages here, docs/scaling.md).

Exit statuses: 0 done (or nothing to do), 1 the database failed, 2 bad arguments (an
``InvalidArgument``, such as a SQLite URL or a partition count out of range).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from functools import partial

from threadkeep import InvalidArgument, Store, ThreadkeepError

from ._engine import normalize_url
from ._migrate import lock_schema
from ._options import MAX_PARTITIONS
from ._partition import partition_tables
from ._store import SqlDriver

__all__ = ["main", "partition_store"]


async def partition_store(url: str, partitions: int) -> dict[str, int]:
    """Convert the store at ``url`` to ``partitions`` hash partitions of ``chat_id``.

    The store is first migrated to the head revision (as ``Store.open`` does).

    Args:
        url: A ``postgresql+asyncpg://`` store URL (``?schema=`` and the other URL options
            as for ``SqlStore``; without ``?partitions=``).
        partitions: The number of partitions, 2 to 1024.

    Returns:
        Rows moved per table; ``{}`` if the store already had that many partitions.

    Raises:
        InvalidArgument: If the URL is not a PostgreSQL store URL or ``partitions`` is out of
            range.
        BackendUnavailable: If the database fails (nothing is changed).
    """
    if isinstance(partitions, bool) or not 2 <= partitions <= MAX_PARTITIONS:
        raise InvalidArgument(f"--partitions must be from 2 to {MAX_PARTITIONS}, not {partitions}")
    if normalize_url(url).get_backend_name() != "postgresql":
        raise InvalidArgument("partitioning is for PostgreSQL stores; this URL is SQLite")
    driver = SqlDriver(url)
    async with Store(driver), driver.db.transaction() as conn:
        await conn.run_sync(lock_schema)
        return await conn.run_sync(partial(partition_tables, partitions=partitions))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="threadkeep-sql", description="Maintenance commands of threadkeep's SQL driver."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    partition = commands.add_parser(
        "partition",
        help="hash-partition an existing PostgreSQL store's per-chat tables by chat_id",
        description=(
            "Rebuild messages, message_refs, steps and runs as N hash partitions of chat_id, "
            "moving their rows, in one transaction (docs/scaling.md)."
        ),
    )
    partition.add_argument("url", help="the store URL (postgresql+asyncpg://...)")
    partition.add_argument("--partitions", type=int, required=True, help="N, 2 to 1024")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``threadkeep-sql`` with ``argv`` (default: the process's); return the exit status."""
    args = _parser().parse_args(argv)
    try:
        moved = asyncio.run(partition_store(args.url, args.partitions))
    except InvalidArgument as exc:
        print(f"threadkeep-sql: error: {exc}", file=sys.stderr)
        return 2
    except ThreadkeepError as exc:
        print(f"threadkeep-sql: error: {exc}", file=sys.stderr)
        return 1
    if not moved:
        print(f"already {args.partitions} partitions: nothing to do")
    for table, rows in moved.items():
        print(f"{table}: {rows} rows moved into {args.partitions} partitions")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
