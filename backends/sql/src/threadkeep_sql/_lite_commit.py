"""SQLite: ``_commit_run`` in one thread hop (see :mod:`threadkeep_sql._lite`).

The same steps as the transactional ``CommitMixin`` path (lock the chat with
``BEGIN IMMEDIATE``, check the run's revision, append the messages as ``_lite_paths``
appends them, insert or replace the run, save the steps as ``_save_steps_locked`` does), run
as one function on the connection's thread instead of one hand-off per statement: a run's
``begin_run`` or ``end_run`` was 40-60 hand-offs through SQLAlchemy. The function returns
plain values; models are built back on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import sqlalchemy as sa

from threadkeep import PreparedMessage, Run, Step, as_utc

from ._archive import step_values
from ._lite import LiteOps
from ._lite_paths import _append
from ._messages import _LOCK_HOT_CHAT
from ._runs import _RESERVE_STEP_SEQS, run_values
from ._schema import runs, steps

__all__ = ["LOCK_RUN", "LiteCommit", "commit_on_thread"]

_rn, _s = runs.c, steps.c
LOCK_RUN = (
    sa.select(_rn.revision)
    .where(_rn.chat_id == sa.bindparam("chat_id"), _rn.run_id == sa.bindparam("run_id"))
    .with_for_update()
)
"""The run's revision, its row locked for the transaction (``FOR UPDATE``; SQLite: no-op)."""
_INSERT_RUN = sa.insert(runs)
_UPDATE_RUN = (
    sa.update(runs)
    .where(_rn.chat_id == sa.bindparam("k_chat_id"), _rn.run_id == sa.bindparam("k_run_id"))
    .values(
        status=sa.bindparam("v_status"),
        lease_expires_at=sa.bindparam("v_lease"),
        updated_at=sa.bindparam("v_updated_at"),
        body=sa.bindparam("v_body"),
        revision=sa.bindparam("v_revision"),
    )
)
_FIND_STEP = sa.select(_s.seq, _s.created_at).where(_s.step_id == sa.bindparam("step_id"))
_INSERT_STEP = sa.insert(steps)
_UPDATE_STEP = (
    sa.update(steps)
    .where(_s.step_id == sa.bindparam("k_step_id"))
    .values(
        chat_id=sa.bindparam("v_chat_id"),
        seq=sa.bindparam("v_seq"),
        run_id=sa.bindparam("v_run_id"),
        stack_id=sa.bindparam("v_stack_id"),
        status=sa.bindparam("v_status"),
        created_at=sa.bindparam("v_created_at"),
        updated_at=sa.bindparam("v_updated_at"),
        body=sa.bindparam("v_body"),
    )
)

LiteCommit = tuple[int, list[tuple[int, Sequence[Any] | None]], list[Step]]
"""``(stored revision, per message (seq, None) or (-1, stored row), stored steps)``."""


def _save_steps(
    ops: LiteOps, given: Sequence[Step], now: datetime, body: Callable[[Step], str]
) -> list[Step]:
    """``RunsMixin._save_steps_locked`` on the connection's thread."""
    known: dict[UUID, tuple[int, datetime | None]] = {}
    for step_id in dict.fromkeys(s.step_id for s in given):
        row = ops.first(_FIND_STEP, {"step_id": step_id})
        if row is not None:
            known[step_id] = (row[0], as_utc(row[1]))
    wanted: dict[UUID, set[UUID]] = {}
    for step in given:
        if step.step_id not in known:
            wanted.setdefault(step.chat_id, set()).add(step.step_id)
    next_seqs: dict[UUID, int] = {}
    for chat_id in sorted(wanted):
        count = len(wanted[chat_id])
        top = ops.scalar(_RESERVE_STEP_SEQS, {"b_chat_id": chat_id, "count": count})
        if top is not None:
            next_seqs[chat_id] = top - count
    stored: list[Step] = []
    for step in given:
        if step.step_id in known:
            seq, created = known[step.step_id]
            record = step.model_copy(update={"seq": seq, "created_at": created, "updated_at": now})
            values = step_values(record, body(record))
            params = {f"v_{k}": v for k, v in values.items() if k != "step_id"}
            ops.execute_many(_UPDATE_STEP, [{**params, "k_step_id": step.step_id}])
        elif step.chat_id in next_seqs:
            seq = next_seqs[step.chat_id]
            next_seqs[step.chat_id] += 1
            created = step.created_at or now
            record = step.model_copy(update={"seq": seq, "created_at": created, "updated_at": now})
            ops.execute_many(_INSERT_STEP, [step_values(record, body(record))])
            known[step.step_id] = (seq, created)
        else:
            continue
        stored.append(record)
    return stored


def commit_on_thread(
    ops: LiteOps,
    *,
    run: Run,
    run_body: str,
    expected_revision: int | None,
    items: Sequence[PreparedMessage],
    given: Sequence[Step],
    now: datetime,
    body: Callable[[Step], str],
) -> LiteCommit | None:
    """The whole ``_commit_run`` inside ``BEGIN IMMEDIATE`` (on the connection's thread).

    Returns:
        See :data:`LiteCommit`; ``None`` (nothing written) when the chat is not live and
        hot or the run check fails.

    Raises:
        IdempotencyConflict: If a message's ``agui_id`` is stored with another payload
            (the transaction is rolled back: nothing is written).
    """
    if ops.scalar(_LOCK_HOT_CHAT, {"chat_id": run.chat_id}) is None:
        return None
    stored_revision = ops.scalar(LOCK_RUN, {"chat_id": run.chat_id, "run_id": run.run_id})
    if stored_revision != expected_revision:
        return None
    outcomes: list[tuple[int, Sequence[Any] | None]] = []
    if items:
        appended = _append(ops, run.chat_id, items, now)
        if appended is None:  # pragma: no cover - the chat was locked hot above
            return None
        outcomes = appended
    revision = run.revision if expected_revision is None else expected_revision + 1
    values = {**run_values(run, run_body), "revision": revision}
    if expected_revision is None:
        key = {"chat_id": run.chat_id, "run_id": run.run_id, "created_at": run.created_at}
        ops.execute_many(_INSERT_RUN, [{**values, **key}])
    else:
        params = {f"v_{k}": v for k, v in values.items()}
        params["v_lease"] = params.pop("v_lease_expires_at")
        ops.execute_many(
            _UPDATE_RUN, [{**params, "k_chat_id": run.chat_id, "k_run_id": run.run_id}]
        )
    saved = _save_steps(ops, given, now, body) if given else []
    return revision, outcomes, saved
