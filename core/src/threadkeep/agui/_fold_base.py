"""The fold's machinery: the event-handler registry, dispatch, record helpers, build hooks.

The storage agent is an open state machine: every seam is a
method a subclass overrides. ``event_handlers()`` maps event classes to handler-method names
and dispatch walks the event's MRO, so a subclass of a known event finds its handler and a
subclass of the agent adds handlers with ``{**super().event_handlers(), MyEvent: "..."}``.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from ag_ui.core import BaseEvent

from .._models import Message, MessageStatus, Reasoning, Role, ToolCall
from .._runs import StepStatus
from ._state import REUSED_ID_NOTE, FoldState, Record
from ._text import TextBuffer, repair_model, utf8_size
from ._wire import coerce

__all__ = ["FoldBase"]

_log = logging.getLogger("threadkeep.agui")


class FoldBase:
    """Registry, dispatch, record helpers and build hooks shared by the handler families."""

    _handler_cache: ClassVar[dict[type[BaseEvent], str | None]] = {}

    @classmethod
    def event_handlers(cls) -> dict[type[BaseEvent], str]:
        """Return the event class -> handler-method name table.

        Override as ``{**super().event_handlers(), MyEvent: "handle_my_event"}``; the handler
        is ``async def handle_my_event(self, state: FoldState, event: MyEvent) -> None``.
        """
        return {}

    @classmethod
    def handler_name(cls, event_type: type[BaseEvent]) -> str | None:
        """Return the handler method name for an event class, walking its MRO, or ``None``."""
        cache: dict[type[BaseEvent], str | None] | None = cls.__dict__.get("_handler_cache")
        if cache is None:  # one cache per class: a subclass may register other handlers
            cache = {}
            cls._handler_cache = cache
        if event_type not in cache:
            table = cls.event_handlers()
            cache[event_type] = next((table[k] for k in event_type.__mro__ if k in table), None)
        return cache[event_type]

    async def dispatch(self, state: FoldState, event: BaseEvent) -> None:
        """Fold one event: close pending chunk messages, then call its handler.

        Events are first read as the shapes real stacks send say (``_dialects``: a tool
        result without ``messageId``, a ``RUN_ERROR`` with its text under ``error``...).
        Events with no registered handler go to :meth:`handle_unknown_event`.
        """
        event = coerce(event)
        state.event_timestamp = event.timestamp
        if state.text_chunk is not None or state.tool_chunk is not None:
            await self.close_chunks(state, event)
        name = self.handler_name(type(event))
        if name is None:
            await self.handle_unknown_event(state, event)
            return
        await getattr(self, name)(state, event)

    async def handle_unknown_event(self, state: FoldState, event: BaseEvent) -> None:
        """Handle an event no handler is registered for; the default ignores it.

        Override to persist custom or future event types (``CUSTOM``, ``RAW`` and
        ``SUBAGENT_*`` arrive here by default).
        """

    async def close_chunks(self, state: FoldState, event: BaseEvent) -> None:
        """End chunk-opened records when another kind of event arrives (AG-UI chunk rules).

        Called before an event is handled while a chunk-opened record is pending.
        """

    # -- build hooks ----------------------------------------------------------------------

    def build_message_create(self, state: FoldState, *, agui_id: str | None, role: Role) -> Message:
        """Build a new message of the run, active and in progress.

        Override to return a ``Message`` subclass with extra fields (they are stored and read
        back on every driver). ``state.active_step`` is the AG-UI step in progress.
        """
        return Message(
            role=role,
            agui_id=agui_id or None,
            run_id=state.run_id,
            status=MessageStatus.ACTIVE,
            in_progress=True,
            step=state.active_step,
        )

    def build_tool_call_create(self, state: FoldState, *, agui_id: str, name: str) -> ToolCall:
        """Build a new nested tool call (active, empty arguments); override for subclasses."""
        return ToolCall(agui_id=agui_id, name=name, status=MessageStatus.ACTIVE)

    def build_reasoning_create(
        self, state: FoldState, *, agui_id: str | None, name: str | None
    ) -> Reasoning:
        """Build a new nested reasoning (active, empty content); override for subclasses."""
        return Reasoning(agui_id=agui_id or None, name=name, status=MessageStatus.ACTIVE)

    def message_update_fields(self, state: FoldState, record: Record) -> dict[str, Any]:
        """Return extra fields merged into a message when it is written after it ended.

        The default is empty. Override to persist fields declared on a ``Message``
        subclass, for example ``{"finished_at": state.event_timestamp}``.
        """
        return {}

    def materialize(self, state: FoldState, record: Record) -> Message:
        """Return the message to write for a record (its snapshot, plus update fields)."""
        message = record.snapshot()
        if not record.open:
            extra = self.message_update_fields(state, record)
            if extra:
                message = type(message).model_validate({**message.model_dump(), **extra})
                message, _ = repair_model(message)
        return message

    # -- record helpers --------------------------------------------------------------------

    async def open_record(
        self,
        state: FoldState,
        *,
        agui_id: str | None,
        role: Role,
        tool_host: bool = False,
        write: bool = True,
        reopen: bool = True,
    ) -> Record:
        """Return the run's record for ``agui_id``, or start one.

        A record of that id that ended is reopened, or with ``reopen=False`` a new record
        starts (an id used again, as by a ``TEXT_MESSAGE_START``): that record stores
        ``"<id>#<n>"`` as its ``agui_id`` and the id in ``metadata["agui_id"]`` (see
        ``FoldState.run_agui_id``). A new record is written at once under the
        ``incremental`` policy (a boundary), unless ``write`` is false (the caller fills it
        and ends it first).

        Args:
            state: The run's fold state.
            agui_id: The AG-UI message id, or ``None`` (a record the fold names itself).
            role: The role of a new record.
            tool_host: Whether a new record is opened to hold tool calls.
            write: Whether a new record is written now (``incremental``).
            reopen: Whether an ended record of that id is reopened (else a new one starts).

        Returns:
            The record.
        """
        record = state.record_for(agui_id)
        if record is not None and (record.open or reopen):
            if not record.open:
                record.open = True
                record.message.status = MessageStatus.ACTIVE
                record.message.in_progress = True
            return record
        stored_id = state.run_agui_id(agui_id)
        message = self.build_message_create(state, agui_id=stored_id, role=role)
        if stored_id != (agui_id or None):
            message.metadata = {**message.metadata, REUSED_ID_NOTE: agui_id}
        record = Record(message=message, key=state.new_key(agui_id), tool_host=tool_host)
        self.match_previous_attempt(state, record)
        state.add_record(record, agui_id)
        if write and not record.replayed:
            await state.writer.record_boundary(state, record)
        return record

    def match_previous_attempt(self, state: FoldState, record: Record) -> None:
        """On a resumed run, match a new record to what an earlier attempt stored.

        Issue 18: an agent resuming a run may re-send the events of work that completed.
        A record whose AG-UI id names a message of the run stored ``complete``, or opened
        inside an AG-UI step the earlier attempt completed, is *replayed*: its events are
        folded and never written. A record whose id names a message left unfinished
        (interrupted, errored) takes that message's place: it is written over it.
        """
        stored_id = record.message.agui_id
        earlier = state.previous_messages.get(stored_id) if stored_id else None
        step = state.active_step
        done_step = state.previous_steps.get(self.agui_step_key(state, step)) if step else None
        if earlier is not None and earlier.status is not MessageStatus.COMPLETE:
            record.message.message_id = earlier.message_id
            record.stored = True
        elif earlier is not None or (
            done_step is not None and done_step.status is StepStatus.COMPLETED
        ):
            record.replayed = record.stored = True
            record.dirty = False

    @staticmethod
    def agui_step_key(state: FoldState, step_name: str | None) -> str:
        """Return the key of the ``agui_step`` step recorded for an AG-UI step name.

        ``"<stack_id>:agui_step:<name>"`` for the name's first start in the run, with
        ``"#<n>"`` appended for its n-th (LangGraph names a step after its graph node, and a
        node such as ``agent`` runs several times in one run): each start is its own step,
        and a resumed run replaying the stream finds each again.
        """
        base = f"{state.stack_id}:agui_step:{step_name}"
        return state.step_keys.get(step_name or "", base)

    @staticmethod
    def count_step_start(state: FoldState, step_name: str) -> None:
        """Count a ``STEP_STARTED`` of ``step_name`` and set the key of this start."""
        starts = state.step_starts[step_name] = state.step_starts.get(step_name, 0) + 1
        base = f"{state.stack_id}:agui_step:{step_name}"
        state.step_keys[step_name] = base if starts == 1 else f"{base}#{starts}"

    async def boundary(self, state: FoldState, record: Record) -> None:
        """Tell the writer a record reached a boundary (written now under ``incremental``)."""
        record.dirty = True
        await state.writer.record_boundary(state, record)

    async def finish(self, state: FoldState, record: Record, status: MessageStatus) -> None:
        """End a record (and its active nested records) with ``status`` and write it.

        A truncated record (see :meth:`add_delta`) ends ``errored`` whatever ``status``.
        """
        if record.truncated_at is not None:
            status = MessageStatus.ERRORED
        state.finish_record(record, status)
        await state.writer.record_boundary(state, record)

    async def add_delta(
        self, state: FoldState, record: Record, buffer: TextBuffer, delta: str
    ) -> None:
        """Fold a streamed delta into one of the record's buffers, within the store's limit.

        A message may hold at most the store's ``max_message_bytes`` of payload. A delta
        that would pass it is dropped, and so is every later delta of
        the record: the record keeps what came before (whole deltas), notes
        ``metadata["truncated"] = {"kept_bytes": n, "dropped_bytes": m}``, ends
        ``errored``, and the run ends ``errored`` too; a warning is logged once.

        Args:
            state: The run's fold state.
            record: The record the delta belongs to.
            buffer: The record's buffer for it (content, a call's arguments, a reasoning).
            delta: The streamed text.
        """
        size = utf8_size(delta)
        if record.truncated_at is None:
            limit = state.writer.store.max_message_bytes
            if record.streamed_bytes + size <= limit:
                buffer.append(delta, size)
                await state.writer.record_delta(state, record)
                return
            record.truncated_at = record.streamed_bytes
            record.dirty = True
            _log.warning(
                "threadkeep: message %r of run %r passed this store's max_message_bytes "
                "(%d); it is truncated at %d bytes of streamed text and ends errored",
                record.message.agui_id or record.key,
                state.run_id,
                limit,
                record.truncated_at,
            )
        record.dropped_bytes += size
