"""The group commit's statement (PostgreSQL): many callers' appends in one ``INSERT``.

What :class:`threadkeep_sql._group.GroupCommitter` sends for a group of two calls or more:
the group's rows go in as one JSON parameter (``json_to_recordset``); the statement locks the
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

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

import orjson
from sqlalchemy import TextClause, text

from threadkeep import Message, PreparedMessage, as_utc

from ._pg_append import nested_refs
from ._schema import escape_key

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


# The group's rows travel as ONE ``json`` parameter (an array of objects, one a message,
# made by orjson in C) unpacked by ``json_to_recordset``, not one array per column: asyncpg
# encodes every element of every array through Python with type checks (about 19
# ``isinstance`` a message, and 1.9 us a ``timestamptz``), which was the largest share of a
# group's client CPU left (``bench/README.md``, "Group commit", session 25: measured).
# ``ord`` (the row's place in the group, from 0) comes from ``WITH ORDINALITY``; a key
# left out or ``null`` is a NULL column, and ``created_at`` defaults to the call's
# ``updated_at`` here. The body travels as a JSON string (orjson escapes it, the server
# unescapes it), so the stored text is the body exactly whatever it holds.
# The chats are locked in ``chat_id`` order by the statement itself (``ORDER BY`` under
# ``FOR UPDATE``: rows are locked as the sort returns them), found by an array of the
# rows' own chat ids (``= ANY(ARRAY(...))``: one btree probe a distinct chat, whatever the
# planner guesses of the recordset's size): no set of chats is built on the client. Whether
# a chat is hot is checked on the locked rows (``FOR UPDATE`` returns the latest version),
# not in the locking scan: there it let the planner scan the partial index of every live
# chat (``ux_chats_live_key``) and filter the group's out of them (seen in ``EXPLAIN``).
_ROWS = """
    SELECT n - 1 AS ord, call, chat_id, message_id, agui_id, role, kind, run_id, request_id,
           block_id, COALESCE(created_at, updated_at) AS created_at, updated_at, fingerprint,
           body
      FROM ROWS FROM (json_to_recordset(CAST(:rows AS json))
                      AS (c int, h uuid, m uuid, a text, r text, k text, u text, q text,
                          b text, t timestamptz, w timestamptz, f text, y text))
           WITH ORDINALITY
           AS x(call, chat_id, message_id, agui_id, role, kind, run_id, request_id,
                block_id, created_at, updated_at, fingerprint, body, n)"""

_GROUP = f"""
WITH u AS MATERIALIZED ({_ROWS}
),
locked AS MATERIALIZED (
    SELECT chats.chat_id, chats.deleted_at, chats.status FROM chats
     WHERE chats.chat_id = ANY(ARRAY(SELECT u.chat_id FROM u))
     ORDER BY chats.chat_id
       FOR UPDATE
),
hot AS (
    SELECT locked.chat_id FROM locked
     WHERE locked.deleted_at IS NULL AND locked.status = 'active'
),
stale AS (
    SELECT DISTINCT u.call FROM u
     WHERE u.agui_id IS NOT NULL
       AND (SELECT true FROM messages
             WHERE messages.chat_id = u.chat_id AND messages.agui_id = u.agui_id LIMIT 1)
),
fresh AS MATERIALIZED (
    SELECT u.*, row_number() OVER (PARTITION BY u.chat_id ORDER BY u.ord) AS rank
      FROM u JOIN hot USING (chat_id)
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

    Each message is one object of the ``rows`` JSON array, in queue order (``WITH
    ORDINALITY`` numbers them); ``c`` names its call (the call's index in ``group``), which
    the result rows carry. Key columns are escaped as ``KeyText`` escapes them; a naive
    datetime is taken as UTC (``as_utc``).
    """
    rows: list[dict[str, Any]] = []
    add = rows.append
    for index, call in enumerate(group):
        chat_id, now = call.chat_id, call.now
        for item in call.items:
            m = item.message
            add(
                {
                    "c": index,
                    "h": chat_id,
                    "m": m.message_id,
                    "a": None if m.agui_id is None else escape_key(m.agui_id),
                    "r": m.role.value,
                    "k": m.kind.value,
                    "u": None if m.run_id is None else escape_key(m.run_id),
                    "q": None if m.request_id is None else escape_key(m.request_id),
                    "b": None if m.block_id is None else escape_key(m.block_id),
                    "t": m.created_at,
                    "w": now,
                    "f": item.fingerprint,
                    "y": item.body,
                }
            )
    params: dict[str, Any] = {"rows": orjson.dumps(rows, default=_other, option=_JSON).decode()}
    if not any(m.tool_calls or m.reasonings for call in group for m in _messages(call)):
        return GROUP_APPEND, params
    params.update(nested_refs([item for call in group for item in call.items]))
    return GROUP_APPEND_REFS, params


_JSON = orjson.OPT_NAIVE_UTC
"""UUIDs and datetimes are orjson's own (C); a naive datetime is written as UTC."""


def _other(value: object) -> str:
    """What orjson writes for a subclass of ``datetime`` or ``UUID`` (its own types only).

    Raises:
        TypeError: For any other type (orjson's way to refuse it; a bug in the caller).
    """
    if isinstance(value, datetime):
        return as_utc(value).isoformat()  # type: ignore[union-attr]
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} has no JSON form here")


def _messages(call: GroupedCall) -> Iterator[Message]:
    return (item.message for item in call.items)
