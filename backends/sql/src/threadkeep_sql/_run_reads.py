"""``_read_run_context``: what a run reads before it begins, in one round trip.

``StorageAgent`` reads the chat's context (is the chat hot, its last boundary, the messages
after it) and looks up the client's new message ids before every run: five or six round
trips one primitive at a time. Here it is one statement on PostgreSQL (a ``UNION ALL`` of
the four parts, tagged by a ``part`` column) and one thread hop on SQLite (the driver's own
statements run on the connection's thread, :mod:`threadkeep_sql._lite`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import sqlalchemy as sa

from ._lite import LiteOps
from ._messages import _AFTER, _GET_BY_AGUI, _IS_HOT, _LAST_BOUNDARY
from ._schema import MESSAGE_COLUMNS, escape_key

__all__ = ["PG_RUN_CONTEXT", "lite_run_context", "pg_params"]

_COLS = "chat_id, seq, revision, created_at, updated_at, deleted_at, body, fingerprint"
_HOT = "SELECT 1 FROM chats WHERE chat_id = :chat_id AND deleted_at IS NULL AND status = 'active'"
_SQL = f"""
WITH h AS ({_HOT}),
b AS (
    SELECT {_COLS} FROM messages
     WHERE chat_id = :chat_id AND kind = 'boundary' AND deleted_at IS NULL
       AND EXISTS (SELECT 1 FROM h)
     ORDER BY seq DESC LIMIT 1
)
SELECT 0 AS part, {_COLS} FROM b
UNION ALL
(SELECT 1, {_COLS} FROM messages
  WHERE chat_id = :chat_id AND deleted_at IS NULL AND EXISTS (SELECT 1 FROM h)
    AND seq > COALESCE((SELECT seq FROM b), 0)
  ORDER BY seq LIMIT :limit)
UNION ALL
SELECT 2, {_COLS} FROM messages
 WHERE chat_id = :chat_id AND agui_id = ANY(CAST(:agui_ids AS text[]))
   AND deleted_at IS NULL AND EXISTS (SELECT 1 FROM h)
UNION ALL
SELECT 3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM h
"""  # noqa: S608 - built from constant fragments only

PG_RUN_CONTEXT = sa.text(_SQL).columns(
    sa.column("part", sa.Integer()), *(sa.column(c.name, c.type) for c in MESSAGE_COLUMNS)
)
"""The read on PostgreSQL; rows ``(part, *MESSAGE_COLUMNS)``, seq ASC within part 1. Parts:
0 the last boundary, 1 the window after it, 2 the messages holding the ids, 3 one row
when the chat is hot (none at all otherwise)."""


def pg_params(chat_id: UUID, agui_ids: Sequence[str], limit: int) -> dict[str, Any]:
    """Return the parameters of :data:`PG_RUN_CONTEXT` (key columns escaped by hand)."""
    return {"chat_id": chat_id, "agui_ids": [escape_key(a) for a in agui_ids], "limit": limit}


def lite_run_context(
    ops: LiteOps, *, chat_id: UUID, agui_ids: Sequence[str], limit: int
) -> list[Sequence[Any]]:
    """The same rows on SQLite, on the connection's thread (none: the chat is not hot)."""
    if not ops.scalar(_IS_HOT, {"chat_id": chat_id}):
        return []
    rows: list[Sequence[Any]] = [(3,)]
    boundary = ops.first(_LAST_BOUNDARY, {"chat_id": chat_id})
    after = 0
    if boundary is not None:
        rows.append((0, *boundary))
        after = boundary[1]
    params = {"chat_id": chat_id, "after": after, "limit": limit}
    rows += [(1, *row) for row in ops.all(_AFTER, params)]
    for agui_id in agui_ids:
        held = ops.first(_GET_BY_AGUI, {"chat_id": chat_id, "agui_id": agui_id})
        if held is not None:
            rows.append((2, *held))
    return rows
