"""``commit_run``: a run record with its messages and steps, in one transaction.

Three ways, by backend: PostgreSQL sends the common case as one statement
(:mod:`._pg_commit`), SQLite runs the whole transaction in one thread hop
(:mod:`._lite_commit`), and everything else (a batch the one statement cannot take, a
PostgreSQL pooler in transaction mode) takes the SQLAlchemy transaction below.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any
from uuid import UUID

import sqlalchemy as sa

from threadkeep import Message, PreparedMessage, Run, Step
from threadkeep.driver import NOT_PLAIN, plain_copy

from ._errors import is_unique_violation
from ._lite import run_on_thread
from ._lite_commit import LOCK_RUN, commit_on_thread
from ._messages import MessagesMixin
from ._pg_commit import commit_run_one
from ._run_reads import PG_RUN_CONTEXT, lite_run_context, pg_params
from ._runs import RunsMixin, run_values
from ._schema import runs

__all__ = ["CommitMixin"]

CommitResult = tuple[Run, list[tuple[Message, bool]], list[Step]]
_HOT_PART = 3


class _Undecided:
    """``_commit_run_fast``: the one statement wrote nothing, and the transaction decides why."""


_UNDECIDED = _Undecided()


class CommitMixin(MessagesMixin, RunsMixin):
    """The atomic ``commit_run`` (``Store.begin_run`` / ``Store.end_run``)."""

    async def commit_run(
        self,
        run: Run,
        expected_revision: int | None,
        messages: Sequence[PreparedMessage],
        steps: Sequence[Step],
        now: datetime,
    ) -> CommitResult | None:
        if self._db.dialect == "sqlite":
            return await self._commit_run_lite(run, expected_revision, messages, steps, now)
        if self._db.has_raw_driver:
            fast = await self._commit_run_fast(run, expected_revision, messages, steps, now)
            if not isinstance(fast, _Undecided):
                return fast
        return await self._commit_run_transaction(run, expected_revision, messages, steps, now)

    async def read_run_context(
        self, chat_id: UUID, agui_ids: Sequence[str], limit: int
    ) -> tuple[Message | None, list[Message], bool, dict[str, Message]] | None:
        if self._db.dialect == "sqlite":
            work = partial(lite_run_context, chat_id=chat_id, agui_ids=agui_ids, limit=limit)
            rows: Sequence[Sequence[Any]] = await run_on_thread(self._db, work, write=False)
        else:
            async with self._db.runner() as runner:
                rows = await runner.all(PG_RUN_CONTEXT, pg_params(chat_id, agui_ids, limit))
        if not any(row[0] == _HOT_PART for row in rows):
            return None
        parts: dict[int, list[Sequence[Any]]] = {0: [], 1: [], 2: []}
        for part, *columns in rows:
            if part != _HOT_PART:
                parts[part].append(columns)
        boundaries = self._message_rows(parts[0])
        window = self._message_rows(parts[1])
        held = {m.agui_id: m for m in self._message_rows(parts[2]) if m.agui_id is not None}
        boundary = boundaries[0] if boundaries else None
        return boundary, window, len(parts[1]) >= limit, held

    async def _commit_run_fast(
        self,
        run: Run,
        expected_revision: int | None,
        messages: Sequence[PreparedMessage],
        steps: Sequence[Step],
        now: datetime,
    ) -> CommitResult | _Undecided | None:
        """PostgreSQL: the batch in one statement.

        Returns:
            The result; ``None`` when the run check failed (nothing written); or
            ``_UNDECIDED`` when the transaction must decide (the chat is not hot, a message
            or step of the batch is stored, a racing duplicate, a batch shape it leaves out).
        """
        if len({s.step_id for s in steps}) != len(steps) or any(
            s.chat_id != run.chat_id for s in steps
        ):
            return _UNDECIDED  # a step given twice, or of another chat
        marker = f'"seq":{2**62 + secrets.randbits(60)}'
        records: list[Step] = []
        bodies: list[tuple[Step, str]] = []
        for step in steps:
            changes = {"seq": int(marker[6:]), "created_at": step.created_at or now}
            record = step.model_copy(update={**changes, "updated_at": now})
            body = self.record_body(record)
            if body.count(marker) != 1:
                return _UNDECIDED  # the marker also occurs in the step's own data
            records.append(record)
            bodies.append((record, body))
        revision = run.revision if expected_revision is None else expected_revision + 1
        run_body = self.record_body(run)
        async with self._db.runner(write=True) as runner:
            try:
                row = await commit_run_one(
                    runner,
                    run=run,
                    run_body=run_body,
                    expected_revision=expected_revision,
                    items=messages,
                    steps=bodies,
                    seq_marker=marker,
                    now=now,
                )
            except Exception as exc:
                if is_unique_violation(exc):  # a racing duplicate: nothing was written
                    return _UNDECIDED
                raise
        written, first_seq, first_step = row
        if written is None:
            return None if first_seq is not None else _UNDECIDED
        if written != revision or first_seq is None or first_step is None:
            return _UNDECIDED  # not a row this statement returns for a write
        results = [
            (self._new(item, run.chat_id, first_seq + i, now), True)
            for i, item in enumerate(messages)
        ]
        saved = [r.model_copy(update={"seq": first_step + i}) for i, r in enumerate(records)]
        return self._committed(run, run_body, revision, results, saved)

    async def _commit_run_lite(
        self,
        run: Run,
        expected_revision: int | None,
        messages: Sequence[PreparedMessage],
        steps: Sequence[Step],
        now: datetime,
    ) -> CommitResult | None:
        """SQLite: the whole transaction on the connection's thread, in one hop."""
        run_body = self.record_body(run)
        work = partial(
            commit_on_thread,
            run=run,
            run_body=run_body,
            expected_revision=expected_revision,
            items=messages,
            given=steps,
            now=now,
            body=self.record_body,
        )
        outcome = await run_on_thread(self._db, work, write=True)
        if outcome is None:
            return None
        revision, outcomes, saved = outcome
        results = [
            (self._new(item, run.chat_id, seq, now), True)
            if row is None
            else (self._message_row(row), False)
            for item, (seq, row) in zip(messages, outcomes, strict=True)
        ]
        return self._committed(run, run_body, revision, results, saved)

    async def _commit_run_transaction(
        self,
        run: Run,
        expected_revision: int | None,
        messages: Sequence[PreparedMessage],
        steps: Sequence[Step],
        now: datetime,
    ) -> CommitResult | None:
        """The batch through a SQLAlchemy transaction (every case, any dialect)."""
        # The chat row's lock (taken by _insert_locked's first statement, or below when there
        # are no messages) orders concurrent commits of one chat, so the run check holds.
        async with self._db.transaction() as conn:
            if not await self._lock_hot_chat(conn, run.chat_id):
                return None
            params = {"chat_id": run.chat_id, "run_id": run.run_id}
            stored_revision = (await conn.execute(LOCK_RUN, params)).scalar()
            if stored_revision != expected_revision:
                return None
            results: list[tuple[Message, bool]] = []
            if messages:
                inserted = await self._insert_locked(conn, run.chat_id, messages, now)
                if inserted is None:
                    return None
                results = inserted
            revision = run.revision if expected_revision is None else expected_revision + 1
            values = {**run_values(run, self.record_body(run)), "revision": revision}
            if expected_revision is None:
                key = {"chat_id": run.chat_id, "run_id": run.run_id, "created_at": run.created_at}
                await conn.execute(sa.insert(runs).values(**values, **key))
            else:
                await conn.execute(
                    sa.update(runs)
                    .where(runs.c.chat_id == run.chat_id, runs.c.run_id == run.run_id)
                    .values(**values)
                )
            saved = await self._save_steps_locked(conn, steps, now) if steps else []
        return self._committed(run, values["body"], revision, results, saved)

    def _committed(
        self,
        run: Run,
        run_body: str,
        revision: int,
        results: list[tuple[Message, bool]],
        saved: list[Step],
    ) -> CommitResult:
        """Build what every commit path returns (:data:`CommitResult`).

        Returns:
            The run as stored (``run_body``, ``run``'s body, at ``revision``), each message
            with whether this commit created it, and the steps as saved.
        """
        stored = _stored_run(run, revision)
        if stored is None:
            stored = self.record_from_body(Run, run_body, revision=revision)
        return stored, results, saved


def _stored_run(run: Run, revision: int) -> Run | None:
    """The run its body reads back as at ``revision``, as a copy; ``None`` when in doubt.

    ``record_from_body(Run, record_body(run), revision=revision)`` parses and validates the
    body just written (about 20 µs, twice per AG-UI run). A plain ``Run`` whose timestamps
    are UTC and whose metadata is plain JSON (dicts with string keys, lists, strings,
    numbers, booleans, ``None``: what a JSON round trip gives back unchanged), without
    extra fields, reads back as itself: that is a copy with ``revision`` set, its metadata
    copied through (so it shares nothing with the caller's values, as a parsed run does).
    Anything else (a subclass, a tuple, a datetime or a set in metadata, another time zone)
    returns ``None`` and the caller parses the body.
    """
    if type(run) is not Run or run.__pydantic_extra__:
        return None
    if not all(
        value is None or value.tzinfo is UTC
        for value in (run.lease_expires_at, run.created_at, run.updated_at)
    ):
        return None
    metadata = plain_copy(run.metadata)
    if metadata is NOT_PLAIN:
        return None
    copy = run.model_copy(update={"revision": revision, "metadata": metadata})
    copy.__pydantic_fields_set__ = set(_RUN_FIELDS)  # a parsed body sets every field
    return copy


_RUN_FIELDS = frozenset(Run.model_fields)
