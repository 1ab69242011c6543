"""Archived-id index: which chat an archived message, tool call or reasoning belongs to.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``archived_ids`` (item id -> chat id) with an index on the chat."""
    op.create_table(
        "archived_ids",
        sa.Column("item_id", sa.Uuid(), primary_key=True),
        sa.Column("chat_id", sa.Uuid(), nullable=False),
    )
    op.create_index("ix_archived_ids_chat", "archived_ids", ["chat_id"])


def downgrade() -> None:
    """Drop ``archived_ids``."""
    op.drop_table("archived_ids")
