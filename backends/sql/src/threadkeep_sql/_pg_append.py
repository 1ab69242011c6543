"""PostgreSQL appends in one round trip each (the fast path of ``insert_messages``).

Measured in this workplace, the idiomatic SQLAlchemy style (a transaction, a SELECT for the
next seq, an INSERT, an UPDATE) costs 2.3-3.9x raw asyncpg; these statements get close to raw:

- one statement per append, sent in ``AUTOCOMMIT`` (no ``BEGIN``/``COMMIT`` round trips): a
  data-modifying CTE bumps the chat's ``next_seq``/``revision``/``last_message_at`` (the row
  lock on the chat orders concurrent appenders, so seqs are strictly increasing in commit
  order) and inserts the message and its ``message_refs`` rows;
- statements are built once (``text`` with named parameters), compiled once and run on
  asyncpg directly (``_runner.PgRunner``), so asyncpg's prepared-statement cache hits;
- a batch goes through ``unnest`` of one array per column; a multi-row
  ``insert().values([...])`` gets no compiled-cache key and recompiles on every call.

A single append carries ``ON CONFLICT (chat_id, agui_id) DO NOTHING``; when nothing comes
back the caller reads the stored message (a retry) or finds the chat is not hot. A batch has
no ``ON CONFLICT`` (it must be all or nothing): if any of its ``agui_id``s is stored the chat
update matches nothing and nothing is written, and a racing duplicate makes the whole
statement fail; either way the caller falls back to the transactional path.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from sqlalchemy import TextClause, text

from threadkeep import Message, PreparedMessage, as_utc

from ._runner import Runner
from ._schema import escape_key

__all__ = [
    "append_batch",
    "append_one",
    "batch_params",
    "column_arrays",
    "key_param",
    "nested_refs",
    "or_null",
    "written_message",
]


def key_param(value: str | None) -> str | None:
    """Escape a key column's value as ``KeyText`` would: these statements are plain text."""
    return None if value is None else escape_key(value)


_BUMP = """
    UPDATE chats
       SET next_seq = next_seq + CAST(:n AS bigint), revision = revision + 1,
           last_message_at = :now, updated_at = :now
     WHERE chat_id = :chat_id AND deleted_at IS NULL AND status = 'active'
       AND NOT EXISTS (SELECT 1 FROM messages
                        WHERE chat_id = :chat_id
                          AND agui_id = ANY(CAST(:agui_ids AS text[])))
 RETURNING next_seq - CAST(:n AS bigint) AS first_seq
"""

# One message: a plain equality, not ``ANY`` of a one-element array, which measured about
# 1.9x slower on the server per append (bench/sql_bench.py, PostgreSQL 15).
_BUMP_ONE = """
    UPDATE chats
       SET next_seq = next_seq + 1, revision = revision + 1,
           last_message_at = :now, updated_at = :now
     WHERE chat_id = :chat_id AND deleted_at IS NULL AND status = 'active'
       AND NOT EXISTS (SELECT 1 FROM messages
                        WHERE chat_id = :chat_id AND agui_id = CAST(:agui_id AS text))
 RETURNING next_seq - 1 AS first_seq
"""

_COLUMNS = (
    "chat_id, seq, message_id, agui_id, role, kind, run_id, request_id, block_id, "
    "revision, created_at, updated_at, fingerprint, body"
)

_ONE = f"""
WITH c AS ({_BUMP_ONE}),
m AS (
    INSERT INTO messages ({_COLUMNS})
    SELECT :chat_id, c.first_seq, CAST(:message_id AS uuid), CAST(:agui_id AS text),
           CAST(:role AS text), CAST(:kind AS text), CAST(:run_id AS text),
           CAST(:request_id AS text), CAST(:block_id AS text), 0,
           CAST(:created_at AS timestamptz), :now, CAST(:fingerprint AS text),
           CAST(:body AS text)
      FROM c
    ON CONFLICT (chat_id, agui_id) WHERE agui_id IS NOT NULL DO NOTHING
    RETURNING seq
){{refs}}
SELECT seq FROM m
"""  # noqa: S608 - built from constant fragments only

_ONE_REFS = """,
r AS (
    INSERT INTO message_refs (chat_id, seq, kind, position, item_id, agui_id)
    SELECT :chat_id, m.seq, u.kind, u.position, u.item_id, u.agui_id
      FROM m, unnest(CAST(:ref_kinds AS text[]), CAST(:ref_positions AS int[]),
                     CAST(:ref_items AS uuid[]), CAST(:ref_aguis AS text[]))
              AS u(kind, position, item_id, agui_id)
)"""

_BATCH = f"""
WITH c AS ({_BUMP}),
m AS (
    INSERT INTO messages ({_COLUMNS})
    SELECT :chat_id, c.first_seq + u.ord - 1, u.message_id, u.agui_id, u.role, u.kind,
           u.run_id, u.request_id, u.block_id, 0, u.created_at, :now, u.fingerprint, u.body
      FROM c, unnest(CAST(:message_ids AS uuid[]), CAST(:agui_ids AS text[]),
                     CAST(:roles AS text[]), CAST(:kinds AS text[]), CAST(:run_ids AS text[]),
                     CAST(:request_ids AS text[]), CAST(:block_ids AS text[]),
                     CAST(:created_ats AS timestamptz[]), CAST(:fingerprints AS text[]),
                     CAST(:bodies AS text[]))
              WITH ORDINALITY AS u(message_id, agui_id, role, kind, run_id, request_id,
                                   block_id, created_at, fingerprint, body, ord)
){{refs}}
SELECT first_seq FROM c
"""  # noqa: S608 - built from constant fragments only

_BATCH_REFS = """,
r AS (
    INSERT INTO message_refs (chat_id, seq, kind, position, item_id, agui_id)
    SELECT :chat_id, c.first_seq + u.idx, u.kind, u.position, u.item_id, u.agui_id
      FROM c, unnest(CAST(:ref_indexes AS bigint[]), CAST(:ref_kinds AS text[]),
                     CAST(:ref_positions AS int[]), CAST(:ref_items AS uuid[]),
                     CAST(:ref_aguis AS text[]))
              AS u(idx, kind, position, item_id, agui_id)
)"""

APPEND_ONE: TextClause = text(_ONE.format(refs=""))
APPEND_ONE_REFS: TextClause = text(_ONE.format(refs=_ONE_REFS))
APPEND_BATCH: TextClause = text(_BATCH.format(refs=""))
APPEND_BATCH_REFS: TextClause = text(_BATCH.format(refs=_BATCH_REFS))


def or_null(values: list[Any]) -> list[Any] | None:
    """``values``, or ``None`` when every one is ``None``.

    For a column of a multi-argument ``unnest``, which pads a NULL array with NULLs: one
    NULL instead of an array whose every element asyncpg would check and encode.
    """
    return None if all(value is None for value in values) else values


def column_arrays(messages: Sequence[Message]) -> dict[str, list[Any] | None]:
    """The per-message columns of an ``unnest`` append as arrays, key columns escaped.

    ``run_ids``, ``request_ids`` and ``block_ids`` are ``None`` when no message has one
    (:func:`or_null`: every statement using these unnests them with other arrays).
    """
    return {
        "message_ids": [m.message_id for m in messages],
        "agui_ids": [key_param(m.agui_id) for m in messages],
        "roles": [m.role.value for m in messages],
        "kinds": [m.kind.value for m in messages],
        "run_ids": or_null([key_param(m.run_id) for m in messages]),
        "request_ids": or_null([key_param(m.request_id) for m in messages]),
        "block_ids": or_null([key_param(m.block_id) for m in messages]),
    }


def nested_refs(messages: Sequence[PreparedMessage]) -> dict[str, list[Any]]:
    """The ``message_refs`` rows of ``messages`` as arrays (``ref_indexes``: message positions)."""
    refs: dict[str, list[Any]] = {
        "ref_indexes": [],
        "ref_kinds": [],
        "ref_positions": [],
        "ref_items": [],
        "ref_aguis": [],
    }
    for index, item in enumerate(messages):
        nested = [("tool_call", c.tool_call_id, c.agui_id) for c in item.message.tool_calls]
        nested += [("reasoning", r.reasoning_id, r.agui_id) for r in item.message.reasonings]
        positions: dict[str, int] = {"tool_call": 0, "reasoning": 0}
        for kind, item_id, agui_id in nested:
            refs["ref_indexes"].append(index)
            refs["ref_kinds"].append(kind)
            refs["ref_positions"].append(positions[kind])
            refs["ref_items"].append(item_id)
            refs["ref_aguis"].append(key_param(agui_id))
            positions[kind] += 1
    return refs


async def append_one(
    run: Runner, chat_id: UUID, item: PreparedMessage, now: datetime
) -> int | None:
    """Append one message in one statement; return its seq, or ``None`` if nothing was written.

    ``None`` means the chat is not hot, or the ``agui_id`` is already stored in the chat.
    """
    message = item.message
    params: dict[str, Any] = {
        "chat_id": chat_id,
        "now": now,
        "message_id": message.message_id,
        "agui_id": key_param(message.agui_id),
        "role": message.role.value,
        "kind": message.kind.value,
        "run_id": key_param(message.run_id),
        "request_id": key_param(message.request_id),
        "block_id": key_param(message.block_id),
        "created_at": message.created_at or now,
        "fingerprint": item.fingerprint,
        "body": item.body,
    }
    stmt = APPEND_ONE
    if message.tool_calls or message.reasonings:
        refs = nested_refs([item])
        del refs["ref_indexes"]
        params.update(refs)
        stmt = APPEND_ONE_REFS
    seq: int | None = await run.scalar(stmt, params)
    return seq


async def append_batch(
    run: Runner, chat_id: UUID, items: Sequence[PreparedMessage], now: datetime
) -> int | None:
    """Append a batch in one statement; return the first seq, or ``None`` if nothing was written.

    The messages get ``first_seq``, ``first_seq + 1``... in order. ``None`` means the chat is
    not hot or one of the ``agui_id``s is already stored. A racing duplicate raises the
    database's unique violation (nothing written).
    """
    params = {"chat_id": chat_id, "now": now, **batch_params(items, now)}
    stmt = APPEND_BATCH_REFS if "ref_kinds" in params else APPEND_BATCH
    first: int | None = await run.scalar(stmt, params)
    return first


def batch_params(items: Sequence[PreparedMessage], now: datetime) -> dict[str, Any]:
    """Return the per-column arrays of a batch (``:n``, ``:message_ids``...) for ``unnest``.

    The ``message_refs`` arrays (``:ref_kinds``...) are included only when a message
    carries tool calls or reasonings. Key columns are escaped as ``KeyText`` escapes them.
    """
    messages = [item.message for item in items]
    params: dict[str, Any] = {
        "n": len(items),
        **column_arrays(messages),
        "created_ats": [m.created_at or now for m in messages],
        "fingerprints": [item.fingerprint for item in items],
        "bodies": [item.body for item in items],
    }
    if any(m.tool_calls or m.reasonings for m in messages):
        params.update(nested_refs(items))
    return params


M = TypeVar("M", bound=Message)

_STORED_FIELDS = frozenset({"chat_id", "seq", "revision", "created_at", "updated_at", "deleted_at"})
_set = object.__setattr__


def written_message(message: M, chat_id: UUID, seq: int, now: datetime) -> M:
    """Return ``message`` as an append just stored it (seq, revision 0, timestamps).

    Equal to ``SqlBase._stored`` (``model_copy(update=...)`` of the store-assigned fields),
    built as pydantic's shallow copy builds it but without ``copy.copy``'s dispatch per
    attribute: about half the CPU of ``model_copy``, paid once per appended message. A
    model with private attributes is copied by ``model_copy`` itself. ``message`` is not
    changed; the copy shares its nested records, as ``model_copy`` does.
    """
    created = as_utc(message.created_at or now)
    update = {
        "chat_id": chat_id,
        "seq": seq,
        "revision": 0,
        "created_at": created,
        "updated_at": now,
        "deleted_at": None,
    }
    if message.__pydantic_private__ is not None:
        return message.model_copy(update=update)
    cls = type(message)
    copied = cls.__new__(cls)
    _set(copied, "__dict__", {**message.__dict__, **update})
    extra = message.__pydantic_extra__
    _set(copied, "__pydantic_extra__", None if extra is None else dict(extra))
    _set(copied, "__pydantic_fields_set__", message.__pydantic_fields_set__ | _STORED_FIELDS)
    _set(copied, "__pydantic_private__", None)
    return copied
