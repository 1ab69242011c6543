"""Write policies: when the fold's records and steps reach the store.

- ``incremental``: a record is written at its boundaries (message, tool-call and reasoning
  starts and ends, tool results) and, while text streams, whenever the bytes streamed since
  its last write pass the flush size. Each write carries the whole record, so a failed write
  is repaired by the next one and nothing folded is lost.
- ``buffered``: two writes per run. Nothing is written while the run
  streams; ``Store.end_run`` writes every record and step and the run's end in one batch.
  A completed ``tool`` step is the exception: it is written when it completes, so a resume
  never runs a finished tool again.

The user input is written by ``Store.begin_run`` at entry under both policies.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from .._errors import (
    BackendUnavailable,
    Conflict,
    IdempotencyConflict,
    InvalidArgument,
    ThreadkeepError,
)
from .._models import Message
from .._runs import RunStatus, Step
from .._store import Store
from .._store_messages import IMMUTABLE_MESSAGE_FIELDS
from ._state import FoldState, Record
from ._text import SURROGATES_NOTE, repair_model, repair_surrogates, repair_value

__all__ = ["BufferedWriter", "IncrementalWriter", "RunWriter", "WritePolicy", "make_writer"]

WritePolicy = Literal["incremental", "buffered"]
"""How a run's records reach the store; see the module docstring."""

Materialize = Callable[[FoldState, Record], Message]
"""Builds the message to write from a record (``StorageAgent.materialize``)."""

_log = logging.getLogger("threadkeep.agui")
_ATTEMPTS = 3
_BACKOFF_SECONDS = 0.05
T = TypeVar("T")


async def _retrying(what: str, action: Callable[[], Awaitable[T]]) -> T:
    """Run ``action``, retrying ``BackendUnavailable`` with a short backoff."""
    for attempt in range(_ATTEMPTS):
        try:
            return await action()
        except BackendUnavailable:
            if attempt == _ATTEMPTS - 1:
                raise
            _log.warning("threadkeep: %s failed; retrying", what, exc_info=True)
            await asyncio.sleep(_BACKOFF_SECONDS * 2**attempt)
    raise AssertionError("unreachable")  # pragma: no cover


class RunWriter(ABC):
    """Writes one run's records and steps under a policy.

    Args:
        store: The open store.
        materialize: Builds the message to write from a record.
        flush_bytes: Incremental flush size in UTF-8 bytes of streamed text (the threshold
            grows to a quarter of what a record already holds, so a very long message is
            rewritten O(log n) times rather than O(n)).
    """

    def __init__(self, store: Store, materialize: Materialize, *, flush_bytes: int) -> None:
        self.store = store
        self.materialize = materialize
        self.flush_bytes = flush_bytes

    @abstractmethod
    async def record_boundary(self, state: FoldState, record: Record) -> None:
        """A record started or ended, or gained or ended a nested record."""

    @abstractmethod
    async def record_delta(self, state: FoldState, record: Record) -> None:
        """Streamed text was appended to a record."""

    @abstractmethod
    async def step_changed(self, state: FoldState, step: Step, *, durable: bool) -> None:
        """A step was created or changed; ``durable`` asks for it to be stored now."""

    @abstractmethod
    async def end(
        self,
        state: FoldState,
        *,
        owner: str,
        status: RunStatus,
        metadata: dict[str, Any],
    ) -> None:
        """Write what is left and end the run (records already carry their end status)."""

    async def save_step_now(self, state: FoldState, step: Step) -> None:
        """Store one step now; on failure it stays dirty for the run's end."""
        step, _ = repair_model(step)
        state.steps[step.step_id] = step
        try:
            await _retrying("saving a step", lambda: self.store.save_steps([step]))
        except ThreadkeepError:
            _log.exception("threadkeep: step %s not saved; retried at the run's end", step.step_id)
            state.dirty_steps[step.step_id] = None
        else:
            state.dirty_steps.pop(step.step_id, None)

    async def append_record(self, state: FoldState, record: Record) -> None:
        """Append a record's message, moving its ``agui_id`` aside if another message holds it.

        A message of an earlier run (or a client) may already hold the id; the record is
        then stored with ``agui_id=None`` and ``metadata["agui_id"]`` set, never dropped.
        """
        message = self.materialize(state, record)
        try:
            await self.store.append_message(state.chat.chat_id, message)
        except IdempotencyConflict:
            assert message.agui_id is not None
            held = await self.store.get_message_by_agui_id(state.chat.chat_id, message.agui_id)
            if held is not None and held.message_id == message.message_id:
                await self.replace_record(state, record)
                return
            self.move_agui_id(record)
            await self.store.append_message(state.chat.chat_id, self.materialize(state, record))
        record.stored = True

    async def replace_record(self, state: FoldState, record: Record) -> None:
        """Write a stored record's current state over it."""
        message = self.materialize(state, record)
        changes = message.model_dump(exclude=set(IMMUTABLE_MESSAGE_FIELDS))
        await self.store.update_message(message.message_id, **changes)

    @staticmethod
    def move_agui_id(record: Record) -> None:
        """Keep the record's AG-UI id in ``metadata["agui_id"]`` and clear ``agui_id``."""
        message = record.message
        # A record already naming its client id there (a reused id, "<id>#<n>") keeps it.
        message.metadata = {"agui_id": message.agui_id, **message.metadata}
        message.agui_id = None


class IncrementalWriter(RunWriter):
    """The ``incremental`` policy (see the module docstring)."""

    async def record_boundary(self, state: FoldState, record: Record) -> None:
        """Write the record now."""
        await self._save(state, record)

    async def record_delta(self, state: FoldState, record: Record) -> None:
        """Write the record when its unwritten text passes the flush size."""
        record.dirty = True
        if record.pending_bytes >= max(self.flush_bytes, record.flushed_bytes // 4):
            await self._save(state, record)

    async def step_changed(self, state: FoldState, step: Step, *, durable: bool) -> None:
        """Store the step now (every step change is a boundary under this policy)."""
        await self.save_step_now(state, step)

    async def _save(self, state: FoldState, record: Record) -> None:
        """Write a record; a new one only after every earlier new one (``seq`` order)."""
        if record.replayed:
            return  # re-sent by a resumed run: stored by an earlier attempt
        if not record.stored:
            for earlier in state.records.values():
                if earlier is record:
                    break
                if not earlier.stored and not await self._write(state, earlier):
                    record.dirty = True  # appended after ``earlier``, at a later boundary
                    return
        await self._write(state, record)

    async def _write(self, state: FoldState, record: Record) -> bool:
        try:
            if record.stored:
                await _retrying("updating a message", lambda: self.replace_record(state, record))
            else:
                await _retrying("appending a message", lambda: self.append_record(state, record))
        except ThreadkeepError:
            _log.exception("threadkeep: message not written yet; retried at the next boundary")
            record.dirty = True
            return False
        record.mark_flushed()
        return True

    async def end(
        self,
        state: FoldState,
        *,
        owner: str,
        status: RunStatus,
        metadata: dict[str, Any],
    ) -> None:
        """Write every record not yet written in its end state, then end the run.

        Records are written in creation order; one the store keeps refusing is logged and
        the rest are still written.
        """
        for record in state.records.values():
            if (record.dirty or not record.stored) and not record.replayed:
                await self._write(state, record)
        steps = [state.steps[i] for i in state.dirty_steps]
        await end_run(self, state, owner=owner, status=status, steps=steps, metadata=metadata)


class BufferedWriter(RunWriter):
    """The ``buffered`` policy (see the module docstring)."""

    async def record_boundary(self, state: FoldState, record: Record) -> None:
        """Nothing is written while the run streams."""

    async def record_delta(self, state: FoldState, record: Record) -> None:
        """Nothing is written while the run streams."""
        record.dirty = True

    async def step_changed(self, state: FoldState, step: Step, *, durable: bool) -> None:
        """Keep the step for the exit batch; store a durable one (a completed tool) now."""
        step, _ = repair_model(step)
        state.steps[step.step_id] = step
        state.dirty_steps[step.step_id] = None
        if durable:
            await self.save_step_now(state, step)
            state.dirty_steps[step.step_id] = None

    async def end(
        self,
        state: FoldState,
        *,
        owner: str,
        status: RunStatus,
        metadata: dict[str, Any],
    ) -> None:
        """Write every record and step and the run's end in one ``Store.end_run`` batch.

        A record an earlier attempt stored unfinished is written over it first.
        """
        records = [r for r in state.records.values() if not r.replayed and not r.stored]
        for record in state.records.values():
            if record.stored and not record.replayed:
                await _overwrite_record(self, state, record)
        steps = [state.steps[i] for i in state.dirty_steps]
        await end_run(
            self, state, owner=owner, status=status, steps=steps, metadata=metadata, records=records
        )


async def _overwrite_record(writer: RunWriter, state: FoldState, record: Record) -> None:
    await _retrying("updating a message", lambda: writer.replace_record(state, record))


async def end_run(
    writer: RunWriter,
    state: FoldState,
    *,
    owner: str,
    status: RunStatus,
    steps: list[Step],
    metadata: dict[str, Any],
    records: list[Record] | None = None,
) -> None:
    """End the run with one ``Store.end_run`` call; never lose what it should have written.

    ``records`` are appended in the same batch. If the batch is refused (an ``agui_id``
    held by another message, the lease lost to a sweeper, a backend failure after
    retries), the records and steps are written one by one instead, so nothing folded is
    lost, and the run keeps whatever status the store gave it.
    """
    store = writer.store
    records = records or []
    error, metadata = _repaired_run_fields(state.error, metadata)

    async def finish(batch: list[Record], batch_steps: list[Step]) -> None:
        await store.end_run(
            state.chat.chat_id,
            state.run_id,
            owner=owner,
            status=status,
            messages=[writer.materialize(state, r) for r in batch],
            steps=batch_steps,
            error=error,
            metadata=metadata,
            current=state.run_record,
        )

    try:
        await _retrying("ending the run", lambda: finish(records, steps))
    except ThreadkeepError as exc:
        lease_lost = isinstance(exc, Conflict) and not isinstance(exc, IdempotencyConflict)
        level = logging.WARNING if isinstance(exc, Conflict) else logging.ERROR
        _log.log(
            level,
            "threadkeep: run %r not ended in one batch, so its %d records are written one "
            "by one instead (the batch was refused: %s)",
            state.run_id,
            len(records),
            exc,
        )
        await _write_one_by_one(writer, state, records, steps)
        if not lease_lost:
            try:
                await _retrying("ending the run", lambda: finish([], []))
            except Conflict:
                pass  # a non-atomic driver ended it before its batch failed; nothing is lost
            except ThreadkeepError:
                _log.exception("threadkeep: run %r could not be ended", state.run_id)
        return
    for record in records:
        record.stored = True
        record.mark_flushed()
    state.dirty_steps.clear()


def _repaired_run_fields(
    error: str | None, metadata: dict[str, Any]
) -> tuple[str | None, dict[str, Any]]:
    """Replace lone surrogates in the run's error and metadata (state, result...), noted."""
    repaired_error, replaced = repair_surrogates(error) if error is not None else (None, 0)
    repaired, count = repair_value(metadata)
    replaced += count
    if replaced:
        repaired = {**repaired, SURROGATES_NOTE: replaced}
    return repaired_error, repaired


async def _write_one_by_one(
    writer: RunWriter, state: FoldState, records: list[Record], steps: list[Step]
) -> None:
    for record in records:
        try:
            await writer.append_record(state, record)
        except ThreadkeepError:
            _log.exception("threadkeep: a message of run %r could not be stored", state.run_id)
    if steps:
        try:
            await writer.store.save_steps(steps)
        except ThreadkeepError:
            _log.exception("threadkeep: steps of run %r could not be stored", state.run_id)


def make_writer(
    policy: WritePolicy, store: Store, materialize: Materialize, *, flush_bytes: int
) -> RunWriter:
    """Return the writer for ``policy`` (``"incremental"`` or ``"buffered"``).

    Raises:
        InvalidArgument: If ``policy`` is neither.
    """
    if policy == "incremental":
        return IncrementalWriter(store, materialize, flush_bytes=flush_bytes)
    if policy == "buffered":
        return BufferedWriter(store, materialize, flush_bytes=flush_bytes)
    raise InvalidArgument(f"write_policy is 'incremental' or 'buffered', not {policy!r}")
