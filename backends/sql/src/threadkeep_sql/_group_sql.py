"""The group commit's statement (PostgreSQL): many callers' appends in one ``INSERT``.

What :class:`threadkeep_sql._group.GroupCommitter` sends for a group of two calls or more:
the group's rows go in as one array per column (``unnest``); the statement locks the
group's chats in ``chat_id`` order (two groups, or a group and any other writer, never
deadlock), leaves out every call one of whose ``agui_id`` values its chat stores already
and every chat that is not hot, reserves each chat's seqs with one ``UPDATE`` per chat
(``last_message_at`` only moves forward: a statement that took its time earlier but
committed later never sets it back), inserts the messages and their ``message_refs`` rows,
and returns each written call's first seq. It has no ``ON CONFLICT``: it writes every row
it selected or fails as a whole. Within a group a chat's calls get seqs in the group's
order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from sqlalchemy import TextClause, text

from threadkeep import PreparedMessage

from ._pg_append import column_arrays, nested_refs, or_null

__all__ = ["GROUP_APPEND", "GROUP_APPEND_REFS", "GroupedCall", "group_statement"]


class GroupedCall(Protocol):
    """One caller's append as the statement sees it (``_group._Call``)."""

    @property
    def chat_id(self) -> UUID:
        """The chat."""

    @property
    def items(self) -> Sequence[PreparedMessage]:
        """The call's messages, in order."""

    @property
    def now(self) -> datetime:
        """The call's write time (``updated_at``; ``created_at`` when not given)."""


# The chats are locked in ``chat_id`` order by the statement itself (``ORDER BY`` under
# ``FOR UPDATE``: rows are locked as the sort returns them), found by the rows' own
# ``chat_ids`` array (a btree ``= ANY`` drops repeated keys): no set of chats is built,
# sorted or encoded on the client.
# ``ord`` (the row's place in the group, from 0) comes from ``WITH ORDINALITY`` and
# ``created_at`` defaults to the call's ``updated_at`` here, and an array of NULLs is sent
# as one NULL (multi-argument ``unnest`` pads it): asyncpg checks every element of every
# array it encodes, which was the largest share of a group's client CPU.
_UNNEST = """
    SELECT n - 1 AS ord, call, chat_id, message_id, agui_id, role, kind, run_id, request_id,
           block_id, COALESCE(created_at, updated_at) AS created_at, updated_at, fingerprint,
           body
      FROM unnest(CAST(:calls AS int[]), CAST(:chat_ids AS uuid[]),
                  CAST(:message_ids AS uuid[]), CAST(:agui_ids AS text[]),
                  CAST(:roles AS text[]), CAST(:kinds AS text[]),
                  CAST(:run_ids AS text[]), CAST(:request_ids AS text[]),
                  CAST(:block_ids AS text[]), CAST(:created_ats AS timestamptz[]),
                  CAST(:updated_ats AS timestamptz[]), CAST(:fingerprints AS text[]),
                  CAST(:bodies AS text[])) WITH ORDINALITY
           AS u(call, chat_id, message_id, agui_id, role, kind, run_id, request_id,
                block_id, created_at, updated_at, fingerprint, body, n)"""

_GROUP = f"""
WITH u AS MATERIALIZED ({_UNNEST}
),
locked AS MATERIALIZED (
    SELECT chats.chat_id FROM chats
     WHERE chats.chat_id = ANY(CAST(:chat_ids AS uuid[]))
       AND chats.deleted_at IS NULL AND chats.status = 'active'
     ORDER BY chats.chat_id
       FOR UPDATE
),
stale AS (
    SELECT DISTINCT u.call FROM u
      JOIN messages ON messages.chat_id = u.chat_id AND messages.agui_id = u.agui_id
),
fresh AS MATERIALIZED (
    SELECT u.*, row_number() OVER (PARTITION BY u.chat_id ORDER BY u.ord) AS rank
      FROM u JOIN locked USING (chat_id)
     WHERE u.call NOT IN (SELECT stale.call FROM stale)
),
c AS (
    UPDATE chats
       SET next_seq = chats.next_seq + f.n, revision = chats.revision + 1,
           last_message_at = GREATEST(chats.last_message_at, f.newest),
           updated_at = GREATEST(chats.updated_at, f.newest)
      FROM (SELECT chat_id, count(*) AS n, max(updated_at) AS newest
              FROM fresh GROUP BY chat_id) AS f
     WHERE chats.chat_id = f.chat_id
 RETURNING chats.chat_id, chats.next_seq - f.n AS first_seq
),
placed AS MATERIALIZED (
    SELECT fresh.*, c.first_seq + fresh.rank - 1 AS seq FROM fresh JOIN c USING (chat_id)
),
m AS (
    INSERT INTO messages (chat_id, seq, message_id, agui_id, role, kind, run_id, request_id,
                          block_id, revision, created_at, updated_at, fingerprint, body)
    SELECT chat_id, seq, message_id, agui_id, role, kind, run_id, request_id, block_id, 0,
           created_at, updated_at, fingerprint, body
      FROM placed ORDER BY ord
){{refs}}
SELECT call, min(seq) AS first_seq FROM placed GROUP BY call
"""  # noqa: S608 - built from constant fragments only

_GROUP_REFS = """,
r AS (
    INSERT INTO message_refs (chat_id, seq, kind, position, item_id, agui_id)
    SELECT placed.chat_id, placed.seq, x.kind, x.position, x.item_id, x.agui_id
      FROM unnest(CAST(:ref_indexes AS int[]), CAST(:ref_kinds AS text[]),
                  CAST(:ref_positions AS int[]), CAST(:ref_items AS uuid[]),
                  CAST(:ref_aguis AS text[]))
              AS x(ord, kind, position, item_id, agui_id)
      JOIN placed ON placed.ord = x.ord
)"""

GROUP_APPEND: TextClause = text(_GROUP.format(refs=""))
GROUP_APPEND_REFS: TextClause = text(_GROUP.format(refs=_GROUP_REFS))


def group_statement(group: Sequence[GroupedCall]) -> tuple[TextClause, dict[str, Any]]:
    """Return the statement writing ``group`` (two calls or more) and its parameters.

    Each message is one row of the arrays, in queue order (``WITH ORDINALITY`` numbers
    them); ``calls`` names each row's call (its index in ``group``), which the result rows
    carry. An array holding only NULLs is sent as NULL (``or_null``).
    """
    rows = [(n, call, item) for n, call in enumerate(group) for item in call.items]
    messages = [item.message for _, _, item in rows]
    params: dict[str, Any] = {
        "calls": [n for n, _, _ in rows],
        "chat_ids": [call.chat_id for _, call, _ in rows],
        **column_arrays(messages),
        "created_ats": or_null([m.created_at for m in messages]),  # NULL: the call's now
        "updated_ats": [call.now for _, call, _ in rows],
        "fingerprints": [item.fingerprint for _, _, item in rows],
        "bodies": [item.body for _, _, item in rows],
    }
    if not any(m.tool_calls or m.reasonings for m in messages):
        return GROUP_APPEND, params
    params.update(nested_refs([item for _, _, item in rows]))
    return GROUP_APPEND_REFS, params
