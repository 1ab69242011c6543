"""PostgreSQL: ``_commit_run`` in one statement (the fast path of ``CommitMixin``).

A run's two writes (``Store.begin_run``: the run row and its input; ``Store.end_run``: its
records, steps and end) each went through a SQLAlchemy transaction of eight to twelve round
trips (``BEGIN``, the chat lock, the run lock, the ``agui_id`` look-up, the inserts one
statement each, the step seqs, ``COMMIT``). Here the common case is one data-modifying
statement sent in ``AUTOCOMMIT`` on the asyncpg connection (``_runner.PgRunner``), so it is
atomic by itself:

- ``c`` locks the live, hot chat's row (``FOR UPDATE``: concurrent writers of the chat
  queue here, as ``_insert_locked`` orders them) and reads its ``next_seq`` and
  ``next_step_seq``, only when none of the batch's ``agui_id`` s and step ids is stored;
- ``r`` inserts the run (``ON CONFLICT DO NOTHING``) or compare-and-sets it on its revision,
  only when ``c`` holds a row;
- the messages, their ``message_refs`` rows, the steps and the chat's counters are written
  ``FROM c, r``: nothing at all when the chat or the run check failed.

When the statement writes nothing (the chat is not hot, a message or step of the batch is
stored already, the run check failed) or meets a racing duplicate (a unique violation,
nothing written), the caller takes the transactional path, which tells those cases apart
exactly as before. Statements are plain ``text`` built once per shape, so asyncpg's
prepared-statement cache serves every later call.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import TextClause, text

from threadkeep import PreparedMessage, Run, Step

from ._pg_append import column_arrays, key_param, nested_refs
from ._runner import Runner

__all__ = ["commit_run_one", "commit_statement"]

_COLUMNS = (
    "chat_id, seq, message_id, agui_id, role, kind, run_id, request_id, block_id, "
    "revision, created_at, updated_at, fingerprint, body"
)


@functools.cache
def commit_statement(*, insert: bool, messages: bool, refs: bool, steps: bool) -> TextClause:
    """Return the one-statement commit for a batch shape (built once per shape).

    Args:
        insert: Insert the run (else compare-and-set it on ``:expected``).
        messages: The batch appends messages.
        refs: Those messages carry tool calls or reasonings (``message_refs`` rows).
        steps: The batch inserts steps.

    Returns:
        A statement returning one row ``(revision, next_seq, next_step_seq)`` when it wrote
        the batch, none when it wrote nothing.
    """
    guards = ""
    if messages:
        guards += (
            "\n       AND NOT EXISTS (SELECT 1 FROM messages WHERE chat_id = :chat_id"
            " AND agui_id = ANY(CAST(:agui_ids AS text[])))"
        )
    if steps:
        guards += (
            "\n       AND NOT EXISTS (SELECT 1 FROM steps"
            " WHERE step_id = ANY(CAST(:step_ids AS uuid[])))"
        )
    parts = [
        f"""c AS (
    SELECT next_seq, next_step_seq FROM chats
     WHERE chat_id = :chat_id AND deleted_at IS NULL AND status = 'active'{guards}
       FOR UPDATE
)""",  # noqa: S608 - built from constant fragments only
        _RUN_INSERT if insert else _RUN_UPDATE,
    ]
    if messages:
        parts.append(_MESSAGES)
        if refs:
            parts.append(_REFS)
    if steps:
        parts.append(_STEPS)
    bumps = []
    if messages:
        bumps.append(
            "next_seq = c.next_seq + CAST(:n AS bigint), revision = chats.revision + 1, "
            "last_message_at = CAST(:now AS timestamptz), "
            "updated_at = CAST(:now AS timestamptz)"
        )
    if steps:
        bumps.append("next_step_seq = c.next_step_seq + CAST(:k AS bigint)")
    if bumps:
        sets = ", ".join(bumps)
        parts.append(f"b AS (UPDATE chats SET {sets} FROM c, r WHERE chats.chat_id = :chat_id)")  # noqa: S608
    select = "SELECT r.revision, c.next_seq, c.next_step_seq FROM c, r"
    sql = "WITH " + ",\n".join(parts) + "\n" + select
    return text(sql)


_RUN_INSERT = """r AS (
    INSERT INTO runs (chat_id, run_id, status, revision, lease_expires_at, created_at,
                      updated_at, body)
    SELECT :chat_id, CAST(:run_id AS text), CAST(:status AS text), CAST(:revision AS bigint),
           CAST(:lease AS timestamptz), CAST(:created_at AS timestamptz),
           CAST(:updated_at AS timestamptz), CAST(:body AS text)
      FROM c
    ON CONFLICT (chat_id, run_id) DO NOTHING
    RETURNING revision
)"""

_RUN_UPDATE = """r AS (
    UPDATE runs
       SET status = CAST(:status AS text), lease_expires_at = CAST(:lease AS timestamptz),
           updated_at = CAST(:updated_at AS timestamptz), body = CAST(:body AS text),
           revision = revision + 1
     WHERE chat_id = :chat_id AND run_id = CAST(:run_id AS text)
       AND revision = CAST(:expected AS bigint) AND EXISTS (SELECT 1 FROM c)
    RETURNING revision
)"""

_MESSAGES = f"""m AS (
    INSERT INTO messages ({_COLUMNS})
    SELECT :chat_id, c.next_seq + u.ord - 1, u.message_id, u.agui_id, u.role, u.kind,
           u.run_id, u.request_id, u.block_id, 0, u.created_at, CAST(:now AS timestamptz),
           u.fingerprint, u.body
      FROM c, r, unnest(CAST(:message_ids AS uuid[]), CAST(:agui_ids AS text[]),
                        CAST(:roles AS text[]), CAST(:kinds AS text[]),
                        CAST(:run_ids AS text[]), CAST(:request_ids AS text[]),
                        CAST(:block_ids AS text[]), CAST(:created_ats AS timestamptz[]),
                        CAST(:fingerprints AS text[]), CAST(:bodies AS text[]))
              WITH ORDINALITY AS u(message_id, agui_id, role, kind, run_id, request_id,
                                   block_id, created_at, fingerprint, body, ord)
)"""  # noqa: S608 - built from constant fragments only

_REFS = """x AS (
    INSERT INTO message_refs (chat_id, seq, kind, position, item_id, agui_id)
    SELECT :chat_id, c.next_seq + u.idx, u.kind, u.position, u.item_id, u.agui_id
      FROM c, r, unnest(CAST(:ref_indexes AS bigint[]), CAST(:ref_kinds AS text[]),
                        CAST(:ref_positions AS int[]), CAST(:ref_items AS uuid[]),
                        CAST(:ref_aguis AS text[]))
              AS u(idx, kind, position, item_id, agui_id)
)"""

_STEPS = """s AS (
    INSERT INTO steps (step_id, chat_id, seq, run_id, stack_id, status, created_at,
                       updated_at, body)
    SELECT u.step_id, :chat_id, c.next_step_seq + u.ord - 1, u.run_id, u.stack_id, u.status,
           u.created_at, CAST(:now AS timestamptz),
           replace(u.body, CAST(:seq_marker AS text),
                   '"seq":' || CAST(c.next_step_seq + u.ord - 1 AS text))
      FROM c, r, unnest(CAST(:step_ids AS uuid[]), CAST(:step_runs AS text[]),
                        CAST(:step_stacks AS text[]), CAST(:step_statuses AS text[]),
                        CAST(:step_createds AS timestamptz[]), CAST(:step_bodies AS text[]))
              WITH ORDINALITY AS u(step_id, run_id, stack_id, status, created_at, body, ord)
)"""


def _message_params(items: Sequence[PreparedMessage], now: datetime) -> dict[str, Any]:
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


def _step_params(records: Sequence[Step], bodies: Sequence[str], marker: str) -> dict[str, Any]:
    return {
        "seq_marker": marker,
        "k": len(records),
        "step_ids": [s.step_id for s in records],
        "step_runs": [key_param(s.run_id) for s in records],
        "step_stacks": [key_param(s.stack_id) for s in records],
        "step_statuses": [s.status.value for s in records],
        "step_createds": [s.created_at for s in records],
        "step_bodies": list(bodies),
    }


async def commit_run_one(
    run_on: Runner,
    *,
    run: Run,
    run_body: str,
    expected_revision: int | None,
    items: Sequence[PreparedMessage],
    steps: Sequence[tuple[Step, str]],
    seq_marker: str,
    now: datetime,
) -> tuple[int, int, int] | None:
    """Write a run, its messages and its new steps in one statement.

    Args:
        run_on: A PostgreSQL runner (``Database.runner(write=True)``).
        run: The run as it is to be stored.
        run_body: Its body (``Store.record_body``).
        expected_revision: ``None`` to insert the run, else the revision to replace.
        items: Messages to append, none of whose ``agui_id`` s may repeat.
        steps: New steps (each with its ``created_at`` set) and their bodies, in order;
            their seqs are given in that order. Each body holds ``seq_marker`` exactly
            once, where its top-level ``"seq"`` goes: the statement writes the seq there.
        seq_marker: The text standing for ``"seq":<n>`` in the step bodies.
        now: The write time.

    Returns:
        ``(stored revision, first message seq, first step seq)``, or ``None`` when
        nothing was written (the caller then takes the transactional path).
    """
    stmt = commit_statement(
        insert=expected_revision is None,
        messages=bool(items),
        refs=any(i.message.tool_calls or i.message.reasonings for i in items),
        steps=bool(steps),
    )
    params: dict[str, Any] = {
        "chat_id": run.chat_id,
        "now": now,
        "run_id": key_param(run.run_id),
        "status": run.status.value,
        "lease": run.lease_expires_at,
        "updated_at": run.updated_at,
        "body": run_body,
    }
    if expected_revision is None:
        params.update(revision=run.revision, created_at=run.created_at)
    else:
        params["expected"] = expected_revision
    if items:
        params.update(_message_params(items, now))
    if steps:
        params.update(_step_params([s for s, _ in steps], [b for _, b in steps], seq_marker))
    row = await run_on.first(stmt, params)
    if row is None:
        return None
    return int(row[0]), int(row[1]), int(row[2])
