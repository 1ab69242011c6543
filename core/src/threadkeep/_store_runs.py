"""Runs: start, claim, heartbeat, sweep.

Needs the ``steps`` capability (steps are in ``_store_steps``). A run is claimed by one
worker at a time with a compare-and-set on its revision; a worker keeps its claim alive
with heartbeats that extend a lease, and a sweeper marks runs whose lease expired (their
process died) interrupted.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from ._content import validate_model
from ._corrupt import collecting
from ._errors import Conflict, InvalidArgument, RunNotFound
from ._models import MessageStatus
from ._paging import MessageFilter
from ._runs import Run, RunStatus, StepStatus
from ._store_args import as_count, as_enum, as_id, as_positive_seconds, as_text
from ._store_core import Component

__all__ = ["RunOps"]

_CAS_ATTEMPTS = 16
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


class RunOps(Component):
    """Run operations: start, heartbeat, finish, claim, sweep, finalize, discard."""

    async def get_run(self, chat_id: UUID | str, run_id: str) -> Run:
        """Implement :meth:`threadkeep.Store.get_run`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        run_id = as_text(run_id, "run_id")
        run = await self._driver.get_run(chat_id, run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id!r} in chat {chat_id}")
        return run

    async def start_run(
        self, chat_id: UUID | str, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Implement :meth:`threadkeep.Store.start_run`."""
        chat_id, run_id, owner, lease_seconds = _run_args(chat_id, run_id, owner, lease_seconds)
        await self._ctx.chats.get_chat(chat_id)
        now = self._ctx.now()
        fresh = Run(
            chat_id=chat_id,
            run_id=run_id,
            owner=owner,
            lease_expires_at=now + _lease(lease_seconds),
            created_at=now,
            updated_at=now,
        )
        stored = await self._driver.insert_run(fresh)
        if stored.owner == owner and stored.status is RunStatus.ACTIVE:
            return await self.heartbeat_run(
                chat_id, run_id, owner=owner, lease_seconds=lease_seconds
            )
        raise Conflict(f"run {run_id!r} is {stored.status} under owner {stored.owner!r}")

    async def heartbeat_run(
        self, chat_id: UUID | str, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Implement :meth:`threadkeep.Store.heartbeat_run`."""
        chat_id, run_id, owner, lease_seconds = _run_args(chat_id, run_id, owner, lease_seconds)
        return await self._transition(
            chat_id,
            run_id,
            lambda run, now: run.status is RunStatus.ACTIVE and run.owner == owner,
            lambda now: {"lease_expires_at": now + _lease(lease_seconds)},
            f"owner {owner!r} does not hold an active lease",
        )

    async def finish_run(
        self,
        chat_id: UUID | str,
        run_id: str,
        *,
        owner: str,
        status: RunStatus | str,
        error: str | None = None,
    ) -> Run:
        """Implement :meth:`threadkeep.Store.finish_run`."""
        chat_id, run_id, owner, _ = _run_args(chat_id, run_id, owner, 1.0)
        ending = as_enum(RunStatus, status, "status")
        if ending is RunStatus.ACTIVE:
            raise InvalidArgument("finish_run needs an end status, not 'active'")
        return await self._transition(
            chat_id,
            run_id,
            lambda run, now: run.status is RunStatus.ACTIVE and run.owner == owner,
            lambda now: {"status": ending, "error": error, "lease_expires_at": None},
            f"owner {owner!r} does not hold an active lease",
        )

    async def claim_run(
        self, chat_id: UUID | str, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Implement :meth:`threadkeep.Store.claim_run`."""
        chat_id, run_id, owner, lease_seconds = _run_args(chat_id, run_id, owner, lease_seconds)

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
        """Implement :meth:`threadkeep.Store.sweep_expired_runs`."""
        self._ctx.require_open()
        limit = as_count(limit, "limit", minimum=1)
        swept: list[Run] = []
        with collecting("skip"):  # drivers leave damaged rows out (``rebuilt_each``)
            expired = await self._driver.expired_runs(self._ctx.now(), limit)
        for run in expired:
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

    async def finalize_run_records(
        self, chat_id: UUID | str, run_id: str, status: RunStatus | str
    ) -> int:
        """Implement :meth:`threadkeep.Store.finalize_run_records`."""
        chat_id = as_id(chat_id, "chat_id")
        run_id = as_text(run_id, "run_id")
        ending = as_enum(RunStatus, status, "status")
        if ending not in _MESSAGE_END:
            raise InvalidArgument("finalize_run_records needs an end status, not 'active'")
        changed = 0
        end = _MESSAGE_END[ending]
        cursor: str | None = None
        while True:
            page = await self._ctx.messages.list_messages(
                chat_id, limit=200, cursor=cursor, message_filter=MessageFilter(run_id=run_id)
            )
            for message in page.items:
                if _is_open_message(message):
                    await self._end_message(message.message_id, end)
                    changed += 1
            if not page.has_more:
                break
            cursor = page.next_cursor
        if self._ctx.capabilities.steps:
            steps = [
                s
                for s in await self._driver.steps_for_run(chat_id, run_id)
                if s.status in _OPEN_STEP
            ]
            for step in steps:
                step.status = _STEP_END[ending]
            if steps:
                await self._driver.save_steps(steps, self._ctx.now())
            changed += len(steps)
        return changed

    async def discard_run(self, chat_id: UUID | str, run_id: str) -> dict[str, int]:
        """Implement :meth:`threadkeep.Store.discard_run`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        run_id = as_text(run_id, "run_id")
        return await self._driver.delete_run_records(chat_id, run_id)

    async def _end_message(self, message_id: UUID, end: MessageStatus) -> None:
        def edit(message: Any) -> dict[str, Any]:
            data: dict[str, Any] = message.model_dump()
            data.update(status=end, in_progress=False)
            for key in ("tool_calls", "reasonings"):
                for item in data[key]:
                    if item["status"] == MessageStatus.ACTIVE:
                        item["status"] = end
            return data

        await self._ctx.messages._rewrite_message(message_id, edit)

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
            now = self._ctx.now()
            if not allowed(run, now):
                raise Conflict(f"run {run_id!r} ({run.status}, owner {run.owner!r}): {refusal}")
            data = {**run.model_dump(), **changes(now), "updated_at": now}
            stored = await self._driver.replace_run(validate_model(type(run), data), run.revision)
            if stored is not None:
                return stored
        raise Conflict(f"run {run_id!r} kept changing under concurrent writers")


def _lease(seconds: float) -> timedelta:
    return timedelta(seconds=as_positive_seconds(seconds, "lease_seconds"))


def _run_args(
    chat_id: object, run_id: object, owner: object, lease_seconds: object
) -> tuple[UUID, str, str, float]:
    """Check the arguments every run transition takes (raises ``InvalidArgument``)."""
    return (
        as_id(chat_id, "chat_id"),
        as_text(run_id, "run_id"),
        as_text(owner, "owner"),
        as_positive_seconds(lease_seconds, "lease_seconds"),
    )


def _is_open_message(message: Any) -> bool:
    if message.in_progress or message.status == MessageStatus.ACTIVE:
        return True
    nested = [*message.tool_calls, *message.reasonings]
    return any(item.status == MessageStatus.ACTIVE for item in nested)
