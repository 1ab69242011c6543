"""``commit_run``: a run record with its messages and steps, in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa

from threadkeep import Message, PreparedMessage, Run, Step

from ._messages import MessagesMixin
from ._runs import RunsMixin, run_values
from ._schema import runs

__all__ = ["CommitMixin"]

_LOCK_RUN = (
    sa.select(runs.c.revision)
    .where(runs.c.chat_id == sa.bindparam("chat_id"), runs.c.run_id == sa.bindparam("run_id"))
    .with_for_update()
)


class CommitMixin(MessagesMixin, RunsMixin):
    """The atomic ``commit_run`` (``Store.begin_run`` / ``Store.end_run``)."""

    async def commit_run(
        self,
        run: Run,
        expected_revision: int | None,
        messages: Sequence[PreparedMessage],
        steps: Sequence[Step],
        now: datetime,
    ) -> tuple[Run, list[tuple[Message, bool]], list[Step]] | None:
        # The chat row's lock (taken by _insert_locked's first statement, or below when there
        # are no messages) orders concurrent commits of one chat, so the run check holds.
        async with self._db.transaction() as conn:
            if not await self._lock_hot_chat(conn, run.chat_id):
                return None
            params = {"chat_id": run.chat_id, "run_id": run.run_id}
            stored_revision = (await conn.execute(_LOCK_RUN, params)).scalar()
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
        stored = self.record_from_body(Run, values["body"], revision=revision)
        return stored, results, saved
