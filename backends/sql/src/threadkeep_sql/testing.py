"""Test helpers for code that runs threadkeep on PostgreSQL (shipped, like ``threadkeep.testing``).

:func:`temporary_schema` gives a test its own empty PostgreSQL schema and a store URL that
points at it (``?schema=NAME``), then drops it, so tests can share one server.
:func:`create_schema` and :func:`drop_schema` are its two halves, for synchronous fixtures
that run each in its own event loop. :class:`SchemaPool` hands tests schemas migrated once and
emptied (and checked) between tests, where the DDL of a new schema per test is the suite's cost.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.engine import make_url

from ._schema_pool import SchemaPool

__all__ = ["SchemaPool", "create_schema", "drop_schema", "temporary_schema"]


async def _execute(url: str, statement: str) -> None:
    import asyncpg  # type: ignore[import-untyped]  # a dependency of threadkeep-sql

    parsed = make_url(url).difference_update_query(["schema"])
    dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


async def create_schema(url: str, *, prefix: str = "tk_test") -> str:
    """Create an empty schema on the server of ``url``; return ``url`` pointing at it.

    Args:
        url: A ``postgresql+asyncpg://`` store URL whose role may create schemas.
        prefix: Start of the schema name; a random 12-hex suffix makes it unique.

    Returns:
        ``url`` with ``?schema=<name>`` added, for ``open_store`` or ``--url``.

    Raises:
        asyncpg.PostgresError: If the schema cannot be created (this is a test helper: the
            server's own error is the most useful one to see).
    """
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    await _execute(url, f'CREATE SCHEMA "{name}"')
    with_schema = make_url(url).update_query_dict({"schema": name})
    return with_schema.render_as_string(hide_password=False)


async def drop_schema(url: str) -> None:
    """Drop the schema named by ``url``'s ``?schema=`` (from :func:`create_schema`), cascading.

    Raises:
        ValueError: If ``url`` names no schema.
    """
    name = make_url(url).query.get("schema")
    if not name:
        raise ValueError(f"{url!r} has no ?schema= to drop")
    await _execute(url, f'DROP SCHEMA "{name}" CASCADE')


@asynccontextmanager
async def temporary_schema(url: str, *, prefix: str = "tk_test") -> AsyncIterator[str]:
    """Yield ``url`` pointing at a new empty schema (see :func:`create_schema`); drop it after."""
    with_schema = await create_schema(url, prefix=prefix)
    try:
        yield with_schema
    finally:
        await drop_schema(with_schema)
