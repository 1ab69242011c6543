"""The group commit's statement (PostgreSQL): many callers' appends in one ``INSERT``.

What :class:`threadkeep_sql._group.GroupCommitter` sends for a group of two calls or more:
the group's rows go in as one JSON parameter (``json_to_recordset``), or for a large group
one array per column (``unnest``); the statement locks the
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

import orjson
from sqlalchemy import TextClause, text

from threadkeep import PreparedMessage, as_utc

from ._pg_append import column_arrays, nested_refs, or_null
from ._schema import escape_key

__all__ = [
    "GROUP_APPEND",
    "GROUP_APPEND_ARRAYS",
    "GROUP_APPEND_ARRAYS_REFS",
    "GROUP_APPEND_REFS",
    "JSON_MAX_MESSAGES",
    "GroupedCall",
    "group_statement",
]


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


# A small group's rows travel as ONE ``json`` parameter (an array of objects, one a message,
# made by orjson in C) unpacked by ``json_to_recordset``; a large group's as one array per
# column (``unnest``). asyncpg encodes every element of every array through Python with
# type checks (about 19 ``isinstance`` a message, 1.9 us a ``timestamptz``), while the
# server parses JSON text slower than binary arrays: measured (``bench/README.md``, "Group
# commit, session 25"), unpacking 8 rows costs 10.7 us a message less client CPU and 5 us
# more server CPU as JSON, 64 rows 5.6 us less and 7 us more, so groups up to
# :data:`JSON_MAX_MESSAGES` go as JSON. ``ord`` (the row's place in the group, from 0)
# comes from ``WITH ORDINALITY``; ``created_at`` defaults to the call's ``updated_at``
# here. As JSON, a key ``null`` is a NULL column and the body travels as a JSON string
# (orjson escapes it, the server unescapes it: the stored text is the body exactly). As
# arrays, one holding only NULLs is sent as one NULL (multi-argument ``unnest`` pads it).
# The chats are locked in ``chat_id`` order by the statement itself (``ORDER BY`` under
# ``FOR UPDATE``: rows are locked as the sort returns them), found by an array of the
# rows' own chat ids (``= ANY(ARRAY(...))``: one btree probe a distinct chat, whatever the
# planner guesses of the row source's size): no set of chats is built on the client.
# Whether a chat is hot is checked on the locked rows (``FOR UPDATE`` returns the latest
# version), not in the locking scan: there it let the planner scan the partial index of
# every live chat (``ux_chats_live_key``) and filter the group's out of them (``EXPLAIN``).
# A stored ``agui_id`` is probed per row (a correlated subplan on ``ux_messages_agui``): as
# a join, the row source's guessed 100 rows made the planner hash a sequential scan of
# ``messages`` (``EXPLAIN``), a cost growing with the table.
_COLUMNS = """
    SELECT n - 1 AS ord, call, chat_id, message_id, agui_id, role, kind, run_id, request_id,
           block_id, COALESCE(created_at, updated_at) AS created_at, updated_at, fingerprint,
           body"""

_JSON_ROWS = f"""{_COLUMNS}
      FROM ROWS FROM (json_to_recordset(CAST(:rows AS json))
                      AS (c int, h uuid, m uuid, a text, r text, k text, u text, q text,
                          b text, t timestamptz, w timestamptz, f text, y text))
           WITH ORDINALITY
           AS x(call, chat_id, message_id, agui_id, role, kind, run_id, request_id,
                block_id, created_at, updated_at, fingerprint, body, n)"""

_ARRAY_ROWS = f"""{_COLUMNS}
      FROM unnest(CAST(:calls AS int[]), CAST(:chat_ids AS uuid[]),
                  CAST(:message_ids AS uuid[]), CAST(:agui_ids AS text[]),
                  CAST(:roles AS text[]), CAST(:kinds AS text[]),
                  CAST(:run_ids AS text[]), CAST(:request_ids AS text[]),
                  CAST(:block_ids AS text[]), CAST(:created_ats AS timestamptz[]),
                  CAST(:updated_ats AS timestamptz[]), CAST(:fingerprints AS text[]),
                  CAST(:bodies AS text[])) WITH ORDINALITY
           AS x(call, chat_id, message_id, agui_id, role, kind, run_id, request_id,
                block_id, created_at, updated_at, fingerprint, body, n)"""

_GROUP = """
WITH u AS MATERIALIZED ({rows}
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
){refs}
SELECT call, min(seq) AS first_seq FROM placed GROUP BY call
"""

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

GROUP_APPEND: TextClause = text(_GROUP.format(rows=_JSON_ROWS, refs=""))
GROUP_APPEND_REFS: TextClause = text(_GROUP.format(rows=_JSON_ROWS, refs=_GROUP_REFS))
GROUP_APPEND_ARRAYS: TextClause = text(_GROUP.format(rows=_ARRAY_ROWS, refs=""))
GROUP_APPEND_ARRAYS_REFS: TextClause = text(_GROUP.format(rows=_ARRAY_ROWS, refs=_GROUP_REFS))

JSON_MAX_MESSAGES = 32
"""Groups of up to this many messages send their rows as one JSON parameter, larger ones
as one array per column (a count; the crossover measured, see the comment above)."""


def group_statement(group: Sequence[GroupedCall]) -> tuple[TextClause, dict[str, Any]]:
    """Return the statement writing ``group`` (two calls or more) and its parameters.

    Each message is one row, in queue order (``WITH ORDINALITY`` numbers them), naming its
    call (the call's index in ``group``), which the result rows carry: one JSON object
    each for up to :data:`JSON_MAX_MESSAGES` messages, one element of each column's array
    beyond. Key columns are escaped as ``KeyText`` escapes them.
    """
    items = [item for call in group for item in call.items]
    refs = any(item.message.tool_calls or item.message.reasonings for item in items)
    if len(items) <= JSON_MAX_MESSAGES:
        params: dict[str, Any] = {"rows": _json_rows(group)}
        stmt = GROUP_APPEND_REFS if refs else GROUP_APPEND
    else:
        params = _array_rows(group)
        stmt = GROUP_APPEND_ARRAYS_REFS if refs else GROUP_APPEND_ARRAYS
    if refs:
        params.update(nested_refs(items))
    return stmt, params


def _json_rows(group: Sequence[GroupedCall]) -> str:
    """The group's rows as one JSON array of objects (a naive datetime is taken as UTC)."""
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
    return orjson.dumps(rows, default=_other, option=_JSON).decode()


def _array_rows(group: Sequence[GroupedCall]) -> dict[str, Any]:
    """The group's rows as one array per column (all-NULL columns as one NULL)."""
    rows = [(n, call, item) for n, call in enumerate(group) for item in call.items]
    messages = [item.message for _, _, item in rows]
    return {
        "calls": [n for n, _, _ in rows],
        "chat_ids": [call.chat_id for _, call, _ in rows],
        **column_arrays(messages),
        "created_ats": or_null([m.created_at for m in messages]),  # NULL: the call's now
        "updated_ats": [call.now for _, call, _ in rows],
        "fingerprints": [item.fingerprint for _, _, item in rows],
        "bodies": [item.body for _, _, item in rows],
    }


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
