"""Steps and runs for the in-memory reference driver."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from .._content import PreparedMessage
from .._corrupt import rebuilt_each
from .._driver_base import DriverBase
from .._models import Message
from .._runs import Run, RunStatus, Step, StepStatus
from ._state import MemoryState, RunRow, StepRow

__all__ = ["MemoryRunsMixin"]


class MemoryRunsMixin(DriverBase):
    """The ``steps`` capability over :class:`MemoryState`."""

    if TYPE_CHECKING:
        _state: MemoryState

        def _insert_locked(
            self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
        ) -> list[tuple[Message, bool]]: ...

    def _step(self, row: StepRow) -> Step:
        return self.record_from_body(Step, row.body, chat_id=row.chat_id, seq=row.seq)

    async def save_steps(self, steps: Sequence[Step], now: datetime) -> list[Step]:
        with self._state.lock:
            return self._save_steps_locked(steps, now)

    def _save_steps_locked(self, steps: Sequence[Step], now: datetime) -> list[Step]:
        state = self._state
        stored: list[Step] = []
        for step in steps:
            chat = state.chats.get(step.chat_id)
            existing = state.steps.get(step.step_id)
            if existing is not None:
                seq, created = existing.seq, self._step(existing).created_at
            elif chat is not None:
                seq, created = chat.next_step_seq, step.created_at or now
                chat.next_step_seq += 1
            else:
                continue
            record = step.model_copy(update={"seq": seq, "created_at": created, "updated_at": now})
            state.steps[step.step_id] = StepRow(
                body=self.record_body(record),
                chat_id=step.chat_id,
                seq=seq,
                run_id=step.run_id,
                stack_id=step.stack_id,
                completed=step.status is StepStatus.COMPLETED,
            )
            stored.append(record)
        return stored

    async def get_step(self, step_id: UUID) -> Step | None:
        with self._state.lock:
            row = self._state.steps.get(step_id)
            return None if row is None else self._step(row)

    def _steps_where(self, keep: object) -> list[Step]:
        rows = [r for r in self._state.steps.values() if keep(r)]  # type: ignore[operator]
        return [self._step(r) for r in sorted(rows, key=lambda r: r.seq)]

    async def steps_for_run(self, chat_id: UUID, run_id: str) -> list[Step]:
        with self._state.lock:
            return self._steps_where(lambda r: r.chat_id == chat_id and r.run_id == run_id)

    async def steps_for_stack(self, stack_id: str) -> list[Step]:
        with self._state.lock:
            return self._steps_where(lambda r: r.stack_id == stack_id)

    async def last_incomplete_step(self, chat_id: UUID) -> Step | None:
        with self._state.lock:
            steps = self._steps_where(lambda r: r.chat_id == chat_id and not r.completed)
            return steps[-1] if steps else None

    async def scan_steps(self, chat_id: UUID, after_seq: int, limit: int) -> list[Step]:
        with self._state.lock:
            steps = self._steps_where(lambda r: r.chat_id == chat_id and r.seq > after_seq)
            return steps[:limit]

    async def delete_hot_steps(self, chat_id: UUID) -> int:
        with self._state.lock:
            doomed = [k for k, r in self._state.steps.items() if r.chat_id == chat_id]
            for key in doomed:
                del self._state.steps[key]
            return len(doomed)

    async def restore_steps(self, chat_id: UUID, steps: Sequence[Step]) -> int:
        state = self._state
        with state.lock:
            chat = state.chats.get(chat_id)
            inserted = 0
            for step in steps:
                if chat is None or step.step_id in state.steps or step.seq is None:
                    continue
                state.steps[step.step_id] = StepRow(
                    body=self.record_body(step),
                    chat_id=chat_id,
                    seq=step.seq,
                    run_id=step.run_id,
                    stack_id=step.stack_id,
                    completed=step.status is StepStatus.COMPLETED,
                )
                chat.next_step_seq = max(chat.next_step_seq, step.seq + 1)
                inserted += 1
            return inserted

    async def delete_run_records(self, chat_id: UUID, run_id: str) -> dict[str, int]:
        state = self._state
        with state.lock:
            chat = state.chats.get(chat_id)
            doomed_messages = []
            if chat is not None:
                doomed_messages = [s for s, r in chat.messages.items() if r.run_id == run_id]
                for seq in doomed_messages:
                    row = chat.messages.pop(seq)
                    chat.seqs.remove(seq)
                    state.message_index.pop(row.message_id, None)
                    if row.agui_id is not None:
                        state.agui_index.pop((chat_id, row.agui_id), None)
                if doomed_messages:
                    chat.revision += 1
            doomed_steps = [
                k for k, r in state.steps.items() if r.chat_id == chat_id and r.run_id == run_id
            ]
            for key in doomed_steps:
                del state.steps[key]
            run = state.runs.pop((chat_id, run_id), None)
            return {
                "messages": len(doomed_messages),
                "steps": len(doomed_steps),
                "runs": int(run is not None),
            }

    def _run(self, row: RunRow) -> Run:
        # The chat from the row's key, not the body: a damaged body still names its chat.
        return self.record_from_body(Run, row.body, revision=row.revision, chat_id=row.chat_id)

    async def insert_run(self, run: Run) -> Run:
        with self._state.lock:
            key = (run.chat_id, run.run_id)
            if key not in self._state.runs:
                self._state.runs[key] = RunRow(
                    chat_id=run.chat_id,
                    body=self.record_body(run),
                    revision=run.revision,
                    active=run.status is RunStatus.ACTIVE,
                    lease_expires_at=run.lease_expires_at,
                )
            return self._run(self._state.runs[key])

    async def get_run(self, chat_id: UUID, run_id: str) -> Run | None:
        with self._state.lock:
            row = self._state.runs.get((chat_id, run_id))
            return None if row is None else self._run(row)

    async def replace_run(self, run: Run, expected_revision: int) -> Run | None:
        with self._state.lock:
            row = self._state.runs.get((run.chat_id, run.run_id))
            if row is None or row.revision != expected_revision:
                return None
            return self._write_run_locked(run, expected_revision + 1)

    def _write_run_locked(self, run: Run, revision: int) -> Run:
        row = RunRow(
            chat_id=run.chat_id,
            body=self.record_body(run),
            revision=revision,
            active=run.status is RunStatus.ACTIVE,
            lease_expires_at=run.lease_expires_at,
        )
        self._state.runs[(run.chat_id, run.run_id)] = row
        return self._run(row)

    async def commit_run(
        self,
        run: Run,
        expected_revision: int | None,
        messages: Sequence[PreparedMessage],
        steps: Sequence[Step],
        now: datetime,
    ) -> tuple[Run, list[tuple[Message, bool]], list[Step]] | None:
        # One lock for the run check, the messages and the steps: one atomic write.
        with self._state.lock:
            chat = self._state.chats.get(run.chat_id)
            if chat is None or chat.deleted or chat.archived:
                return None
            row = self._state.runs.get((run.chat_id, run.run_id))
            expected = None if row is None else row.revision
            if expected != expected_revision:
                return None
            results = self._insert_locked(run.chat_id, messages, now) if messages else []
            revision = run.revision if expected_revision is None else expected_revision + 1
            stored = self._write_run_locked(run, revision)
            return stored, results, self._save_steps_locked(steps, now)

    async def expired_runs(self, now: datetime, limit: int) -> list[Run]:
        with self._state.lock:
            rows = [
                r
                for r in self._state.runs.values()
                if r.active and r.lease_expires_at is not None and r.lease_expires_at < now
            ]
            return rebuilt_each(rows[:limit], self._run)
