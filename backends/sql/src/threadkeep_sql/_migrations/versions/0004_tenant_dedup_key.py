"""Tenant-aware dedup keys: a chat's identity is ``(tenant_id, user_id, thread_id)``.

Until this revision ``chats.dedup_key`` was ``sha256("chat" NUL user_id NUL thread_id)``
for every chat, so two tenants could not each hold a live chat for one user and thread
(issue 12). A chat with a tenant now keys on ``sha256("chat" NUL tenant_id NUL user_id NUL
thread_id)`` (``threadkeep.chat_deduplication_key``); this data migration recomputes the
key of every chat that has a tenant (live and deleted alike). Chats without a tenant keep
their key. No unique index can fail on the way up: before it at most one live chat held
each ``(user_id, thread_id)``, so at most one holds each ``(tenant_id, user_id,
thread_id)`` after.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import context, op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_BATCH = 1000

_chats = sa.table(
    "chats",
    sa.column("chat_id", sa.Uuid()),
    sa.column("user_id", sa.String()),
    sa.column("thread_id", sa.String()),
    sa.column("tenant_id", sa.String()),
    sa.column("dedup_key", sa.String()),
    sa.column("deleted_at", sa.DateTime()),
)


def chat_deduplication_key(user_id: str, thread_id: str, tenant_id: str | None) -> str:
    """The key as this revision defines it (frozen here: later code may not change it).

    Returns:
        ``sha256("chat" [NUL tenant_id] NUL user_id NUL thread_id)`` as 64 hex characters,
        equal to ``threadkeep.chat_deduplication_key`` of this revision.
    """
    parts = (
        ("chat", user_id, thread_id)
        if tenant_id is None
        else ("chat", tenant_id, user_id, thread_id)
    )
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


_REKEY = (
    sa.update(_chats)
    .where(_chats.c.chat_id == sa.bindparam("id"))
    .values(dedup_key=sa.bindparam("key"))
)


_PG_TENANT_KEY = (
    "UPDATE chats SET dedup_key = encode(sha256("
    "convert_to('chat', 'UTF8') || '\\x00'::bytea || convert_to(tenant_id, 'UTF8') || "
    "'\\x00'::bytea || convert_to(user_id, 'UTF8') || '\\x00'::bytea || "
    "convert_to(thread_id, 'UTF8')), 'hex') WHERE tenant_id IS NOT NULL"
)
"""PostgreSQL computes the tenant-aware key in the server (``sha256`` of UTF-8 bytea)."""
_PG_PLAIN_KEY = (
    "UPDATE chats SET dedup_key = encode(sha256("
    "convert_to('chat', 'UTF8') || '\\x00'::bytea || convert_to(user_id, 'UTF8') || "
    "'\\x00'::bytea || convert_to(thread_id, 'UTF8')), 'hex') WHERE tenant_id IS NOT NULL"
)
"""The tenant-less key of the chats with a tenant (the downgrade)."""

_SQLITE_GUARD = (
    "CREATE TEMP TRIGGER threadkeep_0004_guard BEFORE UPDATE ON threadkeep_alembic_version "
    "WHEN (SELECT count(*) FROM chats WHERE tenant_id IS NOT NULL) > 0 "
    "BEGIN SELECT RAISE(ABORT, 'chats have a tenant_id: SQLite cannot rekey them in SQL; "
    "upgrade with threadkeep migrate (not --sql)'); END",
)
"""Offline SQLite (``--sql``): SQLite has no SHA-256, so the printed script cannot rekey.

It refuses instead when a chat has a tenant: a temporary trigger (gone with the
connection) aborts the script's version bump, so the database stays at 0003 also when the
runner goes on past a failing statement (the ``sqlite3`` shell without ``-bail``); run
``threadkeep migrate`` online then. A database without tenant chats needs no rekeying and
passes.
"""


def _rekey(*, with_tenant: bool) -> None:
    """Set ``dedup_key`` of every chat with a tenant (server-side on PostgreSQL)."""
    if op.get_context().dialect.name == "postgresql":
        op.execute(_PG_TENANT_KEY if with_tenant else _PG_PLAIN_KEY)
    elif context.is_offline_mode():
        for statement in _SQLITE_GUARD:
            op.execute(statement)
    else:
        _rekey_in_python(with_tenant=with_tenant)


def _rekey_in_python(*, with_tenant: bool) -> None:
    """Recompute the keys in Python (SQLite), in batches of ``_BATCH`` rows."""
    bind = op.get_bind()
    query = sa.select(_chats.c.chat_id, _chats.c.user_id, _chats.c.thread_id, _chats.c.tenant_id)
    rows = bind.execute(query.where(_chats.c.tenant_id.is_not(None))).all()
    for start in range(0, len(rows), _BATCH):
        batch = [
            {
                "id": row.chat_id,
                "key": chat_deduplication_key(
                    row.user_id, row.thread_id, row.tenant_id if with_tenant else None
                ),
            }
            for row in rows[start : start + _BATCH]
        ]
        bind.execute(_REKEY, batch)


def upgrade() -> None:
    """Recompute the dedup key of every chat that has a tenant."""
    _rekey(with_tenant=True)


def downgrade() -> None:
    """Give every chat the tenant-less key again.

    Raises:
        RuntimeError: If two live chats of different tenants share a ``(user_id,
            thread_id)`` (checked online): revision 0003 cannot hold both (delete one
            first). Offline, the unique index refuses the script instead.
    """
    if not context.is_offline_mode():
        _refuse_shared_keys()
    _rekey(with_tenant=False)


def _refuse_shared_keys() -> None:
    """Raise ``RuntimeError`` if live chats of several tenants share a user and thread."""
    live = _chats.c.deleted_at.is_(None)
    shared = (
        op.get_bind()
        .execute(
            sa.select(_chats.c.user_id, _chats.c.thread_id)
            .where(live)
            .group_by(_chats.c.user_id, _chats.c.thread_id)
            .having(sa.func.count() > 1)
            .limit(1)
        )
        .first()
    )
    if shared is not None:
        msg = (
            f"cannot downgrade below 0004: live chats of several tenants share user "
            f"{shared.user_id!r} and thread {shared.thread_id!r}; delete all but one first"
        )
        raise RuntimeError(msg)
