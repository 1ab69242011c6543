"""Steps and runs: resume, claim, heartbeat, sweep (SPEC section 3, "Runs, status and steps").

Needs the ``steps`` capability. A run is claimed by one worker at a time with a
compare-and-set on its revision; a worker keeps its claim alive with heartbeats that extend
a lease, and a sweeper marks runs whose lease expired (their process died) interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from ._content import validate_model
from ._errors import Conflict, InvalidArgument, RunNotFound, StepNotFound
from ._models import MessageStatus
from ._paging import MessageFilter
from ._runs import Run, RunStatus, Step, StepStatus
from ._store_context import ContextOps

__all__ = ["RunOps"]

_CAS_ATTEMPTS = 16
_MAX_STACK_DEPTH = 256
_OPEN_STEP = frozenset({StepStatus.PENDING, StepStatus.RUNNING})
_RESUMABLE = frozenset({RunStatus.INTERRUPTED, RunStatus.ERRORED})
_STEP_END = {
    RunStatus.COMPLETE: StepStatus.COMPLETED,
    RunStatus.INTERRUPTED: StepStatus.INTERRUPTED,
    RunStatus.ERRORED: StepStatus.FAILED,
}
_MESSAGE_END = {
    RunStatus.COMPLETE: MessageStatus.COMPLETE,
    RunStatus.INTERRUPTED: MessageStatus.INTERRUPTED,
    RunStatus.ERRORED: MessageStatus.ERRORED,
}


class RunOps(ContextOps):
    """Step and run operations (Yao seed, "ChatStore Interface", steps part)."""

    async def save_steps(self, steps: Sequence[Step]) -> list[Step]:
        """Insert or replace steps by ``step_id``, atomically (the buffered exit write).

        New steps get a store-assigned ``seq``, increasing within their chat.

        Returns:
            The stored steps, in input order.

        Raises:
            ChatNotFound: If a step's chat does not exist or is deleted.
            InvalidContent: If a string holds a lone surrogate; nothing is written.
            CapabilityNotSupported: If the driver does not store steps.
        """
        self._require_open()
        for chat_id in {s.chat_id for s in steps}:
            await self.get_chat(chat_id)
        for step in steps:
            self.record_body(step)
        return await self._save_steps(list(steps), self._now()) if steps else []

    async def update_step(self, step_id: UUID, **changes: Any) -> Step:
        """Change a step's fields (``status``, ``output``, ``error``, ``space_snapshot``...).

        Raises:
            StepNotFound: If there is no such step.
            InvalidArgument: If ``step_id``, ``chat_id`` or ``seq`` is changed.
        """
        frozen = set(changes) & {"step_id", "chat_id", "seq", "created_at"}
        if frozen:
            raise InvalidArgument(f"cannot change {sorted(frozen)} of a step")
        step = await self.get_step(step_id)
        updated = validate_model(type(step), {**step.model_dump(), **changes})
        (stored,) = await self.save_steps([updated])
        return stored

    async def get_step(self, step_id: UUID) -> Step:
        """Return a step. Raises ``StepNotFound`` if there is none."""
        self._require_open()
        step = await self._get_step(step_id)
        if step is None:
            raise StepNotFound(f"no step {step_id}")
        return step

    async def get_steps(self, chat_id: UUID, run_id: str) -> list[Step]:
        """Return a run's steps in seq order (an archived chat is rehydrated first)."""
        self._require_open()
        steps = await self._steps_for_run(chat_id, run_id)
        if not steps and await self._rehydrate_if_archived(chat_id):
            steps = await self._steps_for_run(chat_id, run_id)
        return steps

    async def get_last_incomplete_step(self, chat_id: UUID) -> Step | None:
        """Return the chat's newest step that is not ``completed`` (where a resume starts).

        An archived chat is rehydrated first.
        """
        self._require_open()
        step = await self._last_incomplete_step(chat_id)
        if step is None and await self._rehydrate_if_archived(chat_id):
            step = await self._last_incomplete_step(chat_id)
        return step

    async def get_stack_steps(self, stack_id: str) -> list[Step]:
        """Return the steps of one stack node (one agent's part of a nested call), in order."""
        self._require_open()
        return await self._steps_for_stack(stack_id)

    async def get_stack_path(self, stack_id: str) -> list[str]:
        """Return the stack ids from the root call down to ``stack_id`` (root first).

        Raises:
            StepNotFound: If no step has ``stack_id`` (or an ancestor has no steps).
            Conflict: If the parent links form a cycle.
        """
        path = [stack_id]
        current = stack_id
        for _ in range(_MAX_STACK_DEPTH):
            steps = await self.get_stack_steps(current)
            if not steps:
                raise StepNotFound(f"no step has stack_id {current!r}")
            parent = steps[0].stack_parent_id
            if parent is None:
                return path[::-1]
            if parent in path:
                raise Conflict(f"stack {stack_id!r} has a cycle through {parent!r}")
            path.append(parent)
            current = parent
        raise Conflict(f"stack {stack_id!r} is deeper than {_MAX_STACK_DEPTH}")

    # -- runs ------------------------------------------------------------------------------

    async def get_run(self, chat_id: UUID, run_id: str) -> Run:
        """Return a run. Raises ``RunNotFound`` if there is none."""
        self._require_open()
        run = await self._get_run(chat_id, run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id!r} in chat {chat_id}")
        return run

    async def start_run(
        self, chat_id: UUID, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Record that ``owner`` starts executing a run, holding it for ``lease_seconds``.

        Idempotent for the same owner (the lease is renewed).

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            Conflict: If the run exists under another owner or has ended (use
                :meth:`claim_run` to resume an ended run).
        """
        await self.get_chat(chat_id)
        now = self._now()
        fresh = Run(
            chat_id=chat_id,
            run_id=run_id,
            owner=owner,
            lease_expires_at=now + _lease(lease_seconds),
            created_at=now,
            updated_at=now,
        )
        stored = await self._insert_run(fresh)
        if stored.owner == owner and stored.status is RunStatus.ACTIVE:
            return await self.heartbeat_run(
                chat_id, run_id, owner=owner, lease_seconds=lease_seconds
            )
        raise Conflict(f"run {run_id!r} is {stored.status} under owner {stored.owner!r}")

    async def heartbeat_run(
        self, chat_id: UUID, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Extend ``owner``'s lease on an active run.

        Raises:
            Conflict: If the run is not active or ``owner`` no longer holds it (a sweeper or
                another worker took it).
        """
        return await self._transition(
            chat_id,
            run_id,
            lambda run, now: run.status is RunStatus.ACTIVE and run.owner == owner,
            lambda now: {"lease_expires_at": now + _lease(lease_seconds)},
            f"owner {owner!r} does not hold an active lease",
        )

    async def finish_run(
        self,
        chat_id: UUID,
        run_id: str,
        *,
        owner: str,
        status: RunStatus,
        error: str | None = None,
    ) -> Run:
        """End ``owner``'s active run as ``complete``, ``interrupted`` or ``errored``.

        Raises:
            InvalidArgument: If ``status`` is ``active``.
            Conflict: If ``owner`` does not hold the active run.
        """
        if status is RunStatus.ACTIVE:
            raise InvalidArgument("finish_run needs an end status, not 'active'")
        return await self._transition(
            chat_id,
            run_id,
            lambda run, now: run.status is RunStatus.ACTIVE and run.owner == owner,
            lambda now: {"status": status, "error": error, "lease_expires_at": None},
            f"owner {owner!r} does not hold an active lease",
        )

    async def claim_run(
        self, chat_id: UUID, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Take an interrupted or errored run (or an active one whose lease expired) to resume it.

        A compare-and-set: of concurrent claimers exactly one succeeds.

        Raises:
            RunNotFound: If there is no such run.
            Conflict: If the run is complete, or held under a live lease (a second claimer).
        """

        def claimable(run: Run, now: datetime) -> bool:
            if run.status in _RESUMABLE:
                return True
            expired = run.lease_expires_at is not None and run.lease_expires_at <= now
            return run.status is RunStatus.ACTIVE and expired

        return await self._transition(
            chat_id,
            run_id,
            claimable,
            lambda now: {
                "status": RunStatus.ACTIVE,
                "owner": owner,
                "error": None,
                "lease_expires_at": now + _lease(lease_seconds),
            },
            "it is complete or another worker holds a live lease",
        )

    async def sweep_expired_runs(self, *, limit: int = 100) -> list[Run]:
        """Mark active runs whose lease expired as interrupted, with their open records.

        For each: the run becomes ``interrupted``; its in-progress messages, tool calls and
        reasonings become ``interrupted``; its pending/running steps become ``interrupted``.

        Returns:
            The runs this call marked (a concurrent sweeper marks the others).
        """
        self._require_open()
        swept: list[Run] = []
        for run in await self._expired_runs(self._now(), limit):
            try:
                marked = await self._transition(
                    run.chat_id,
                    run.run_id,
                    lambda r, now: (
                        r.status is RunStatus.ACTIVE
                        and r.lease_expires_at is not None
                        and r.lease_expires_at <= now
                    ),
                    lambda now: {"status": RunStatus.INTERRUPTED, "lease_expires_at": None},
                    "it is no longer expired",
                )
            except Conflict:
                continue
            await self.finalize_run_records(run.chat_id, run.run_id, RunStatus.INTERRUPTED)
            swept.append(marked)
        return swept

    async def finalize_run_records(self, chat_id: UUID, run_id: str, status: RunStatus) -> int:
        """Give a run's still-open messages, nested records and steps their end status.

        ``complete`` -> complete / completed, ``interrupted`` -> interrupted,
        ``errored`` -> errored / failed (AG-UI seed, run-outcome table). Records already
        ended keep their status.

        Returns:
            How many messages and steps changed.
        """
        changed = 0
        end = _MESSAGE_END[status]
        cursor: str | None = None
        while True:
            page = await self.list_messages(
                chat_id, limit=200, cursor=cursor, message_filter=MessageFilter(run_id=run_id)
            )
            for message in page.items:
                if _is_open_message(message):
                    await self._end_message(message.message_id, end)
                    changed += 1
            if not page.has_more:
                break
            cursor = page.next_cursor
        if self.capabilities.steps:
            steps = [
                s for s in await self._steps_for_run(chat_id, run_id) if s.status in _OPEN_STEP
            ]
            for step in steps:
                step.status = _STEP_END[status]
            if steps:
                await self._save_steps(steps, self._now())
            changed += len(steps)
        return changed

    async def discard_run(self, chat_id: UUID, run_id: str) -> dict[str, int]:
        """Remove every record of a run for good ("an errored turn stores nothing").

        Returns:
            Counts removed per kind (``messages``, ``steps``, ``runs``).
        """
        self._require_open()
        return await self._delete_run_records(chat_id, run_id)

    async def _end_message(self, message_id: UUID, end: MessageStatus) -> None:
        def edit(message: Any) -> dict[str, Any]:
            data: dict[str, Any] = message.model_dump()
            data.update(status=end, in_progress=False)
            for key in ("tool_calls", "reasonings"):
                for item in data[key]:
                    if item["status"] == MessageStatus.ACTIVE:
                        item["status"] = end
            return data

        await self._rewrite_message(message_id, edit)

    async def _transition(
        self,
        chat_id: UUID,
        run_id: str,
        allowed: Any,
        changes: Any,
        refusal: str,
    ) -> Run:
        for _ in range(_CAS_ATTEMPTS):
            run = await self.get_run(chat_id, run_id)
            now = self._now()
            if not allowed(run, now):
                raise Conflict(f"run {run_id!r} ({run.status}, owner {run.owner!r}): {refusal}")
            data = {**run.model_dump(), **changes(now), "updated_at": now}
            stored = await self._replace_run(validate_model(type(run), data), run.revision)
            if stored is not None:
                return stored
        raise Conflict(f"run {run_id!r} kept changing under concurrent writers")


def _lease(seconds: float) -> timedelta:
    if seconds <= 0:
        raise InvalidArgument("lease_seconds must be positive")
    return timedelta(seconds=seconds)


def _is_open_message(message: Any) -> bool:
    if message.in_progress or message.status == MessageStatus.ACTIVE:
        return True
    nested = [*message.tool_calls, *message.reasonings]
    return any(item.status == MessageStatus.ACTIVE for item in nested)
