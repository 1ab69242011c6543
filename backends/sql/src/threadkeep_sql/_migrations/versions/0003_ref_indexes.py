"""Nested-id lookups walk one index in seq order.

``message_refs`` lookups by agui id want the newest match: the index becomes
``(chat_id, kind, agui_id, seq)`` so the walk is ordered; the item-id index gains ``kind``.

Revision ID: 0003
Revises: 0002
Create Date: 2025-01-03
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_NOT_NULL: dict[str, Any] = {
    "postgresql_where": sa.text("agui_id IS NOT NULL"),
    "sqlite_where": sa.text("agui_id IS NOT NULL"),
}


def upgrade() -> None:
    """Replace the two ``message_refs`` lookup indexes."""
    op.drop_index("ix_message_refs_agui", table_name="message_refs")
    op.drop_index("ix_message_refs_item", table_name="message_refs")
    op.create_index(
        "ix_message_refs_agui", "message_refs", ["chat_id", "kind", "agui_id", "seq"], **_NOT_NULL
    )
    op.create_index("ix_message_refs_item", "message_refs", ["item_id", "kind"])


def downgrade() -> None:
    """Restore the indexes of revision 0001."""
    op.drop_index("ix_message_refs_agui", table_name="message_refs")
    op.drop_index("ix_message_refs_item", table_name="message_refs")
    op.create_index(
        "ix_message_refs_agui", "message_refs", ["chat_id", "kind", "agui_id"], **_NOT_NULL
    )
    op.create_index("ix_message_refs_item", "message_refs", ["item_id"])
