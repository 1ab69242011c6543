"""Initial schema: chats, messages, message_refs, steps, runs, settings.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_When = sa.DateTime(timezone=True)


def _partial(where: str) -> dict[str, Any]:
    return {"postgresql_where": sa.text(where), "sqlite_where": sa.text(where)}


def upgrade() -> None:
    """Create every table and index of the first schema."""
    op.create_table(
        "chats",
        sa.Column("seq", _Seq, primary_key=True, autoincrement=True),
        sa.Column("chat_id", sa.Uuid(), nullable=False, unique=True),
        sa.Column("dedup_key", sa.String(64), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text()),
        sa.Column("channel", sa.Text()),
        sa.Column("tenant_id", sa.Text()),
        sa.Column("team_id", sa.Text()),
        sa.Column("name", sa.Text()),
        sa.Column("name_folded", sa.Text()),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("share", sa.String(32), nullable=False),
        sa.Column("archive_ref", sa.Text()),
        sa.Column("revision", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("next_seq", sa.BigInteger(), nullable=False, server_default="1"),
        sa.Column("next_step_seq", sa.BigInteger(), nullable=False, server_default="1"),
        sa.Column("created_at", _When),
        sa.Column("updated_at", _When),
        sa.Column("last_message_at", _When),
        sa.Column("deleted_at", _When),
        sa.Column("body", sa.Text(), nullable=False),
    )
    op.create_index(
        "ux_chats_live_key", "chats", ["dedup_key"], unique=True, **_partial("deleted_at IS NULL")
    )
    op.create_index("ix_chats_user_seq", "chats", ["user_id", "seq"])
    op.create_index("ix_chats_tenant_seq", "chats", ["tenant_id", "seq"])

    op.create_table(
        "messages",
        sa.Column("chat_id", sa.Uuid(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), primary_key=True),
        sa.Column("message_id", sa.Uuid(), nullable=False, unique=True),
        sa.Column("agui_id", sa.Text()),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("run_id", sa.Text()),
        sa.Column("request_id", sa.Text()),
        sa.Column("block_id", sa.Text()),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _When),
        sa.Column("updated_at", _When),
        sa.Column("deleted_at", _When),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
    )
    op.create_index(
        "ux_messages_agui",
        "messages",
        ["chat_id", "agui_id"],
        unique=True,
        **_partial("agui_id IS NOT NULL"),
    )
    op.create_index(
        "ix_messages_run", "messages", ["chat_id", "run_id"], **_partial("run_id IS NOT NULL")
    )
    op.create_index(
        "ix_messages_boundary", "messages", ["chat_id", "seq"], **_partial("kind = 'boundary'")
    )

    op.create_table(
        "message_refs",
        sa.Column("chat_id", sa.Uuid(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), primary_key=True),
        sa.Column("kind", sa.String(32), primary_key=True),
        sa.Column("position", sa.Integer(), primary_key=True),
        sa.Column("item_id", sa.Uuid(), nullable=False),
        sa.Column("agui_id", sa.Text()),
    )
    op.create_index("ix_message_refs_item", "message_refs", ["item_id"])
    op.create_index(
        "ix_message_refs_agui",
        "message_refs",
        ["chat_id", "kind", "agui_id"],
        **_partial("agui_id IS NOT NULL"),
    )

    op.create_table(
        "steps",
        sa.Column("step_id", sa.Uuid(), primary_key=True),
        sa.Column("chat_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.Text()),
        sa.Column("stack_id", sa.Text(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("created_at", _When),
        sa.Column("updated_at", _When),
        sa.Column("body", sa.Text(), nullable=False),
    )
    op.create_index("ux_steps_chat_seq", "steps", ["chat_id", "seq"], unique=True)
    op.create_index("ix_steps_run", "steps", ["chat_id", "run_id", "seq"])
    op.create_index("ix_steps_stack", "steps", ["stack_id", "seq"])

    op.create_table(
        "runs",
        sa.Column("chat_id", sa.Uuid(), primary_key=True),
        sa.Column("run_id", sa.Text(), primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("lease_expires_at", _When),
        sa.Column("created_at", _When),
        sa.Column("updated_at", _When),
        sa.Column("body", sa.Text(), nullable=False),
    )
    op.create_index("ix_runs_lease", "runs", ["lease_expires_at"], **_partial("status = 'active'"))

    op.create_table(
        "settings",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    """Drop everything the upgrade created."""
    for table in ("settings", "runs", "steps", "message_refs", "messages", "chats"):
        op.drop_table(table)
