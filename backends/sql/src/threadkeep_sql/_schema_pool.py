"""``SchemaPool``: reusable PostgreSQL schemas for tests, emptied and checked between tests.

A fresh schema costs a test ``CREATE SCHEMA``, the five Alembic revisions run by the store's
first open (about 30 DDL statements: tables, indexes, a sequence) and ``DROP SCHEMA ...
CASCADE`` afterwards: 0.3-0.6 s of server time per test on a loaded 2-core machine, which
the 196 PostgreSQL contract tests pay one after the other. A :class:`SchemaPool` pays it once
per schema instead:

- :meth:`SchemaPool.take` hands a test a schema no other test holds: an emptied one from the
  pool, or, when the pool is empty, a brand-new *empty* one (the test's own store open then
  migrates it, exactly as before; so the migration path of ``open`` still runs in the suite).
- :meth:`SchemaPool.give_back` returns it after the test. It goes back to the pool only if
  its catalog (tables, columns and their defaults, indexes, constraints, triggers, functions,
  types, policies, privileges, options) equals that of a reference schema the store itself
  migrated to the head, and its version table holds the head revision; then every table but
  the version table is emptied and every sequence restarted, in one transaction. Anything else
  (a test that altered, downgraded or never migrated the schema) drops the schema, as before.

So a test sees exactly what a newly migrated schema holds: the head tables, no rows, and
sequences at their start; never another test's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.engine import make_url

__all__ = ["SchemaPool"]

VERSION_TABLE = "threadkeep_alembic_version"

# Everything a test could change in a schema's catalog, one text item per object, with the
# schema's own name replaced by "<schema>" so two schemas compare equal (`_fingerprint`).
_CATALOG = """
SELECT 'rel ' || c.relname || ' ' || c.relkind::text || c.relpersistence::text
       || ' rls=' || c.relrowsecurity::text || ' acl=' || coalesce(c.relacl::text, '')
       || ' opt=' || coalesce(array_to_string(c.reloptions, ','), '')
       || ' part=' || coalesce(pg_get_expr(c.relpartbound, c.oid), '')
       || ' owner=' || pg_get_userbyid(c.relowner) AS item
  FROM pg_class c WHERE c.relnamespace = $1::regnamespace
UNION ALL
SELECT 'col ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || ' notnull=' || a.attnotnull::text
       || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
       || ' identity=' || a.attidentity::text || ' generated=' || a.attgenerated::text
       || ' acl=' || coalesce(a.attacl::text, '')
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE c.relnamespace = $1::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'idx ' || pg_get_indexdef(i.indexrelid) || ' valid=' || i.indisvalid::text
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
 WHERE c.relnamespace = $1::regnamespace
UNION ALL
SELECT 'con ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = $1::regnamespace
UNION ALL
SELECT 'trg ' || pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = $1::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'fn ' || pg_get_functiondef(p.oid) FROM pg_proc p WHERE p.pronamespace = $1::regnamespace
UNION ALL
SELECT 'type ' || t.typname || ' ' || t.typtype::text FROM pg_type t
 WHERE t.typnamespace = $1::regnamespace
UNION ALL
SELECT 'policy ' || p.polrelid::regclass::text || ' ' || p.polname || ' '
       || coalesce(pg_get_expr(p.polqual, p.polrelid), '')
  FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
 WHERE c.relnamespace = $1::regnamespace
UNION ALL
SELECT 'rule ' || r.rulename || ' ' || pg_get_ruledef(r.oid) FROM pg_rewrite r
  JOIN pg_class c ON c.oid = r.ev_class WHERE c.relnamespace = $1::regnamespace
UNION ALL
SELECT 'schema acl=' || coalesce(n.nspacl::text, '') || ' owner=' || pg_get_userbyid(n.nspowner)
  FROM pg_namespace n WHERE n.oid = $1::regnamespace
"""

_TABLES = """
SELECT c.relname FROM pg_class c
 WHERE c.relnamespace = $1::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
 ORDER BY c.relname
"""

_RESTART_SEQUENCES = """
SELECT setval(s.seqrelid, s.seqstart, false) FROM pg_sequence s
  JOIN pg_class c ON c.oid = s.seqrelid WHERE c.relnamespace = $1::regnamespace
"""


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def _fingerprint(conn: Any, schema: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return ``(catalog items, version rows)`` of ``schema``, its own name made neutral."""
    rows = await conn.fetch(_CATALOG, schema)
    neutral = sorted(str(r["item"]).replace(schema, "<schema>") for r in rows)
    tables = {r["relname"] for r in await conn.fetch(_TABLES, schema)}
    versions: list[str] = []
    if VERSION_TABLE in tables:
        version_table = f"{_quote(schema)}.{_quote(VERSION_TABLE)}"  # quoted identifiers
        fetched = await conn.fetch(f"SELECT * FROM {version_table}")  # noqa: S608
        versions = sorted(repr(tuple(r.values())) for r in fetched)
    return tuple(neutral), tuple(versions)


class SchemaPool:
    """Schemas of one PostgreSQL server, each held by one test at a time (see the module).

    Args:
        url: A ``postgresql+asyncpg://`` store URL (of the primary: the emptying must
            happen where the writes go) whose role may create and drop schemas.
        prefix: Start of every schema name; a random 12-hex suffix follows.
        **store_options: The ``SqlStore`` options the tests open their stores with
            (``partitions=4``...): the reference schema is migrated by a store opened with
            them, so a schema is reused only if it looks like one the tests' own stores make.

    Every method connects and disconnects on the caller's event loop, so one pool serves
    tests that each run their own loop; it holds only names and the reference catalog.
    Not for concurrent use by several tasks; one pool per process.
    """

    def __init__(self, url: str, *, prefix: str = "tk_test", **store_options: Any) -> None:
        parsed = make_url(url).difference_update_query(["schema"])
        self._url = parsed.render_as_string(hide_password=False)
        self._dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        self._prefix, self._options = prefix, store_options
        self._clean: list[str] = []
        self._made: set[str] = set()
        self._reference: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        self.reused = 0
        """Schemas handed out again after emptying (count)."""
        self.dropped = 0
        """Schemas dropped on return because a test changed them (count)."""

    def url_of(self, schema: str) -> str:
        """Return the store URL of ``schema`` (the pool's URL with ``?schema=``)."""
        return (
            make_url(self._url)
            .update_query_dict({"schema": schema})
            .render_as_string(hide_password=False)
        )

    @asynccontextmanager
    async def schema(self) -> AsyncIterator[str]:
        """Yield a store URL on a schema of the pool (:meth:`take`); give it back after.

        A drop-in for :func:`threadkeep_sql.testing.temporary_schema` where the tests open
        their stores with the pool's options.
        """
        name = await self.take()
        try:
            yield self.url_of(name)
        finally:
            await self.give_back(name)

    async def take(self) -> str:
        """Return a schema's name for one test: emptied and at the head, or new and empty.

        Raises:
            asyncpg.PostgresError: If a new schema cannot be created (a test helper: the
                server's own error is the most useful one to see).
        """
        if self._clean:
            self.reused += 1
            return self._clean.pop()
        return await self._create()

    async def give_back(self, schema: str) -> None:
        """Empty ``schema`` for the next test if its catalog is the head's; else drop it.

        The first call migrates the reference schema (a store opened with the pool's
        options, then closed and dropped) to learn the head's catalog.

        Raises:
            asyncpg.PostgresError: If the server refuses the catalog read or the drop.
        """
        reference = await self._reference_catalog()
        conn = await asyncpg.connect(self._dsn)
        try:
            try:
                async with conn.transaction():
                    if await _fingerprint(conn, schema) == reference:
                        await self._empty(conn, schema)
                        self._clean.append(schema)
                        return
            except asyncpg.PostgresError:  # a row that cannot go (a test's own foreign key)
                pass
            await conn.execute(f"DROP SCHEMA {_quote(schema)} CASCADE")
            self._made.discard(schema)
            self.dropped += 1
        finally:
            await conn.close()

    async def close(self) -> None:
        """Drop every schema this pool made that still exists (the pool is empty after)."""
        conn = await asyncpg.connect(self._dsn)
        try:
            for schema in sorted(self._made):
                await conn.execute(f"DROP SCHEMA IF EXISTS {_quote(schema)} CASCADE")
        finally:
            await conn.close()
        self._made.clear()
        self._clean.clear()

    async def _create(self) -> str:
        schema = f"{self._prefix}_{uuid.uuid4().hex[:12]}"
        conn = await asyncpg.connect(self._dsn)
        try:
            await conn.execute(f"CREATE SCHEMA {_quote(schema)}")
        finally:
            await conn.close()
        self._made.add(schema)
        return schema

    async def _reference_catalog(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if self._reference is None:
            schema = f"{self._prefix}_{uuid.uuid4().hex[:12]}"
            conn = await asyncpg.connect(self._dsn)
            try:
                await conn.execute(f"CREATE SCHEMA {_quote(schema)}")
                try:
                    await self._migrate(schema)
                    self._reference = await _fingerprint(conn, schema)
                finally:
                    await conn.execute(f"DROP SCHEMA {_quote(schema)} CASCADE")
            finally:
                await conn.close()
        return self._reference

    async def _migrate(self, schema: str) -> None:
        from ._store import SqlStore  # the store is the one that knows how to migrate

        store = SqlStore(self._url, schema=schema, **self._options)
        await store.open()
        await store.close()

    @staticmethod
    async def _empty(conn: Any, schema: str) -> None:
        tables = [r["relname"] for r in await conn.fetch(_TABLES, schema)]
        # DELETE, not TRUNCATE: on tables of a few rows it is several times cheaper (TRUNCATE
        # makes new files for every table and index); dead rows are autovacuum's.
        await conn.execute(
            "".join(
                f"DELETE FROM {_quote(schema)}.{_quote(table)};"  # noqa: S608 - quoted names
                for table in tables
                if table != VERSION_TABLE
            )
        )
        await conn.fetch(_RESTART_SEQUENCES, schema)
