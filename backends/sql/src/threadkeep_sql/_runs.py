"""Steps and runs of the SQL driver (capability ``steps``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from threadkeep import Conflict, Run, RunStatus, Step, StepStatus, as_utc, rebuilt_each

from ._archive import step_values
from ._base import SqlBase
from ._lite import LiteOps, run_on_thread
from ._schema import chats, message_refs, messages, runs, steps

__all__ = ["RunsMixin", "run_values"]

_SAVE_ATTEMPTS = 4
_s, _rn = steps.c, runs.c

# chat_id first: a damaged body's CorruptRecord still names the row's chat (issue 12)
_STEP_COLUMNS = (_s.chat_id, _s.seq, _s.body)
_RUN_COLUMNS = (_rn.chat_id, _rn.revision, _rn.body)
_GET_STEP = sa.select(*_STEP_COLUMNS).where(_s.step_id == sa.bindparam("step_id"))
_GET_RUN = sa.select(*_RUN_COLUMNS).where(
    _rn.chat_id == sa.bindparam("chat_id"), _rn.run_id == sa.bindparam("run_id")
)
_RESERVE_STEP_SEQS = (
    sa.update(chats)
    .where(chats.c.chat_id == sa.bindparam("b_chat_id"))
    .values(next_step_seq=chats.c.next_step_seq + sa.bindparam("count"))
    .returning(chats.c.next_step_seq)
)


def _first_run(ops: LiteOps, params: dict[str, Any]) -> Sequence[Any] | None:
    return ops.first(_GET_RUN, params)


def run_values(run: Run, body: str) -> dict[str, Any]:
    """Return the ``runs`` columns a write of ``run`` sets (not the key or revision)."""
    return {
        "status": run.status.value,
        "lease_expires_at": run.lease_expires_at,
        "updated_at": run.updated_at,
        "body": body,
    }


class RunsMixin(SqlBase):
    """Step and run primitives (``threadkeep.driver``, "steps and runs")."""

    def _step(self, row: Sequence[Any]) -> Step:
        chat_id, seq, body = row
        return self.record_from_body(Step, body, chat_id=chat_id, seq=seq)

    def _run(self, row: Sequence[Any]) -> Run:
        chat_id, revision, body = row
        return self.record_from_body(Run, body, chat_id=chat_id, revision=revision)

    async def save_steps(self, steps_: Sequence[Step], now: datetime) -> list[Step]:
        for _ in range(_SAVE_ATTEMPTS):
            try:
                if self._db.dialect == "sqlite":
                    return await self._save_steps_lite(steps_, now)
                async with self._db.transaction() as conn:
                    return await self._save_steps_locked(conn, steps_, now)
            except Conflict:  # a concurrent save inserted one of these step_ids first
                continue
        raise Conflict("steps kept being saved concurrently; retry")

    async def _save_steps_lite(self, steps_: Sequence[Step], now: datetime) -> list[Step]:
        """SQLite: ``_save_steps_locked``'s steps in one hop (``_lite_commit._save_steps``).

        It was 16 hand-offs through SQLAlchemy for a run's one step, paid by every
        incremental AG-UI run.
        """
        # Imported here: ``_lite_commit`` builds on this module's statements.
        from ._lite_commit import _save_steps

        work = partial(_save_steps, given=steps_, now=now, body=self.record_body)
        saved: list[Step] = await run_on_thread(self._db, work, write=True)
        return saved

    async def _save_steps_locked(
        self, conn: AsyncConnection, steps_: Sequence[Step], now: datetime
    ) -> list[Step]:
        ids = list({s.step_id for s in steps_})
        found = await conn.execute(
            sa.select(_s.step_id, _s.seq, _s.created_at)
            .where(_s.step_id.in_(ids))
            .with_for_update()
        )
        known: dict[UUID, tuple[int, datetime | None]] = {
            step_id: (seq, as_utc(created)) for step_id, seq, created in found.all()
        }
        next_seqs = await self._reserve_step_seqs(conn, steps_, known)
        stored: list[Step] = []
        for step in steps_:
            if step.step_id in known:
                seq, created = known[step.step_id]
                record = step.model_copy(
                    update={"seq": seq, "created_at": created, "updated_at": now}
                )
                values = step_values(record, self.record_body(record))
                await conn.execute(
                    sa.update(steps).where(_s.step_id == step.step_id).values(values)
                )
            elif step.chat_id in next_seqs:
                seq = next_seqs[step.chat_id]
                next_seqs[step.chat_id] += 1
                created = step.created_at or now
                record = step.model_copy(
                    update={"seq": seq, "created_at": created, "updated_at": now}
                )
                await conn.execute(
                    sa.insert(steps).values(step_values(record, self.record_body(record)))
                )
                known[step.step_id] = (seq, created)
            else:
                continue
            stored.append(record)
        return stored

    async def _reserve_step_seqs(
        self,
        conn: AsyncConnection,
        steps_: Sequence[Step],
        known: dict[UUID, tuple[int, datetime | None]],
    ) -> dict[UUID, int]:
        """Reserve step seqs for the new steps of each chat; map chat -> first reserved seq."""
        wanted: dict[UUID, set[UUID]] = {}
        for step in steps_:
            if step.step_id not in known:
                wanted.setdefault(step.chat_id, set()).add(step.step_id)
        first: dict[UUID, int] = {}
        for chat_id in sorted(wanted):
            count = len(wanted[chat_id])
            result = await conn.execute(_RESERVE_STEP_SEQS, {"b_chat_id": chat_id, "count": count})
            top = result.scalar()
            if top is not None:
                first[chat_id] = top - count
        return first

    async def get_step(self, step_id: UUID) -> Step | None:
        async with self._db.read() as conn:
            row = (await conn.execute(_GET_STEP, {"step_id": step_id})).first()
        return None if row is None else self._step(row)

    async def _steps_where(
        self, *clauses: sa.ColumnElement[bool], limit: int | None = None
    ) -> list[Step]:
        stmt = sa.select(*_STEP_COLUMNS).where(*clauses).order_by(_s.seq).limit(limit)
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return [self._step(row) for row in rows]

    async def steps_for_run(self, chat_id: UUID, run_id: str) -> list[Step]:
        return await self._steps_where(_s.chat_id == chat_id, _s.run_id == run_id)

    async def steps_for_stack(self, stack_id: str) -> list[Step]:
        return await self._steps_where(_s.stack_id == stack_id)

    async def last_incomplete_step(self, chat_id: UUID) -> Step | None:
        stmt = (
            sa.select(*_STEP_COLUMNS)
            .where(_s.chat_id == chat_id, _s.status != StepStatus.COMPLETED.value)
            .order_by(_s.seq.desc())
            .limit(1)
        )
        async with self._db.read() as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else self._step(row)

    async def scan_steps(self, chat_id: UUID, after_seq: int, limit: int) -> list[Step]:
        return await self._steps_where(_s.chat_id == chat_id, _s.seq > after_seq, limit=limit)

    async def delete_run_records(self, chat_id: UUID, run_id: str) -> dict[str, int]:
        m = messages.c
        of_run = sa.select(m.seq).where(m.chat_id == chat_id, m.run_id == run_id)
        async with self._db.transaction() as conn:
            await conn.execute(
                sa.delete(message_refs).where(
                    message_refs.c.chat_id == chat_id, message_refs.c.seq.in_(of_run)
                )
            )
            removed = await conn.execute(
                sa.delete(messages).where(m.chat_id == chat_id, m.run_id == run_id)
            )
            if removed.rowcount:
                await conn.execute(
                    sa.update(chats)
                    .where(chats.c.chat_id == chat_id)
                    .values(revision=chats.c.revision + 1)
                )
            removed_steps = await conn.execute(
                sa.delete(steps).where(_s.chat_id == chat_id, _s.run_id == run_id)
            )
            removed_runs = await conn.execute(
                sa.delete(runs).where(_rn.chat_id == chat_id, _rn.run_id == run_id)
            )
        return {
            "messages": removed.rowcount,
            "steps": removed_steps.rowcount,
            "runs": removed_runs.rowcount,
        }

    async def insert_run(self, run: Run) -> Run:
        values = {
            **run_values(run, self.record_body(run)),
            "chat_id": run.chat_id,
            "run_id": run.run_id,
            "revision": run.revision,
            "created_at": run.created_at,
        }
        stmt = self._upsert(runs).on_conflict_do_nothing(index_elements=[_rn.chat_id, _rn.run_id])
        async with self._db.write() as conn:
            await conn.execute(stmt, values)
        stored = await self.get_run(run.chat_id, run.run_id)
        if stored is None:
            raise Conflict(f"run {run.run_id!r} was removed while it was being started; retry")
        return stored

    async def get_run(self, chat_id: UUID, run_id: str) -> Run | None:
        params = {"chat_id": chat_id, "run_id": run_id}
        row: Sequence[Any] | None
        if self._db.dialect == "sqlite":  # one thread hop (``_lite``)
            row = await run_on_thread(self._db, partial(_first_run, params=params), write=False)
        else:  # PostgreSQL: on asyncpg directly (``_runner.PgRunner``)
            async with self._db.runner() as run:
                row = await run.first(_GET_RUN, params)
        return None if row is None else self._run(row)

    async def replace_run(self, run: Run, expected_revision: int) -> Run | None:
        stmt = (
            sa.update(runs)
            .where(
                _rn.chat_id == run.chat_id,
                _rn.run_id == run.run_id,
                _rn.revision == expected_revision,
            )
            .values(**run_values(run, self.record_body(run)), revision=expected_revision + 1)
            .returning(*_RUN_COLUMNS)
        )
        async with self._db.write() as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else self._run(row)

    async def expired_runs(self, now: datetime, limit: int) -> list[Run]:
        stmt = (
            sa.select(*_RUN_COLUMNS)
            .where(_rn.status == RunStatus.ACTIVE.value, _rn.lease_expires_at < now)
            .order_by(_rn.lease_expires_at)
            .limit(limit)
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return rebuilt_each(rows, self._run)
