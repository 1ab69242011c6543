"""Revision 0004: chats with a tenant are rekeyed on ``(tenant_id, user_id, thread_id)``.

The older schema is made the honest way: a store at the head writes chats, Alembic
downgrades to 0003 (which gives every chat the tenant-less key of that revision), and the
next open upgrades again. PostgreSQL computes the key in the server, SQLite in Python: both
must equal ``threadkeep.chat_deduplication_key``.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from threadkeep import chat_deduplication_key
from threadkeep_sql import SqlStore
from threadkeep_sql._engine import Database, normalize_url
from threadkeep_sql._migrate import _config, current_revision

_KEYS = sa.text("SELECT user_id, thread_id, tenant_id, dedup_key FROM chats")


async def _alembic(url: str, options: dict[str, Any], step: Any) -> list[Any]:
    """Run ``step(config)`` in one transaction; return every chat's key columns after it."""
    database = Database.create(normalize_url(url), schema=options.get("schema"))
    try:
        async with database.transaction() as conn:
            await conn.run_sync(lambda sync: step(_config(sync)))
            assert await conn.run_sync(current_revision) is not None
            return list((await conn.execute(_KEYS)).all())
    finally:
        await database.dispose()


async def test_chats_with_a_tenant_are_rekeyed_and_found_by_tenant(engine_url) -> None:
    url, options = engine_url
    async with SqlStore(url, **options) as store:
        a = await store.create_chat("alice", "t1", tenant_id="acme/é")
        gone = await store.create_chat("alice", "t2", tenant_id="acme/é")
        await store.delete_chat(gone.chat_id)
        plain = await store.create_chat("bob", "t1")
    old = await _alembic(url, options, lambda config: command.downgrade(config, "0003"))
    assert {r.dedup_key for r in old} == {
        chat_deduplication_key(r.user_id, r.thread_id) for r in old
    }, "revision 0003 keys every chat without its tenant"
    async with SqlStore(url, **options) as store:  # opening upgrades to the head
        found = await store.find_chat("alice", "t1", tenant_id="acme/é")
        assert found is not None
        assert found.chat_id == a.chat_id
        assert await store.find_chat("alice", "t1") is None
        assert (await store.create_chat("bob", "t1")).chat_id == plain.chat_id
        other = await store.create_chat("alice", "t1", tenant_id="globex")
        assert other.chat_id != a.chat_id
    new = await _alembic(url, options, lambda config: None)
    assert len(new) == 4
    for row in new:
        assert row.dedup_key == chat_deduplication_key(row.user_id, row.thread_id, row.tenant_id)


async def test_downgrade_refuses_two_tenants_sharing_a_thread(engine_url) -> None:
    url, options = engine_url
    async with SqlStore(url, **options) as store:
        await store.create_chat("alice", "t1", tenant_id="A")
        await store.create_chat("alice", "t1", tenant_id="B")
    with pytest.raises(RuntimeError, match="several tenants share user 'alice'"):
        await _alembic(url, options, lambda config: command.downgrade(config, "0003"))
