"""The event fold: AG-UI events in, typed message records out.

:class:`EventFolder` registers a handler per event family (see ``event_handlers``) and
implements the text, run-lifecycle and step families; tool calls and reasoning live in
``_fold_nested``, state and activity in ``_fold_extras``, message snapshots in
``_fold_snapshot``, events without message content (``RAW``, ``CUSTOM``, usage) in
``_fold_other``. Shapes real stacks send are read as the protocol's first (``_dialects``).

Text: ``TEXT_MESSAGE_START`` opens a message record (role from the event, default
assistant), ``CONTENT`` deltas fold into its ``content``, ``END`` completes it. A
``TEXT_MESSAGE_CHUNK`` opens its message on the first chunk and the message ends when a
chunk with another id or any other event arrives. Deltas for an id the run never started
open the record implicitly, so no delta is lost to a missing start.

Run lifecycle: ``RUN_FINISHED`` completes every unfinished record (``interrupted`` if its
outcome is ``cancelled``), ``RUN_ERROR`` errors them; the
first terminal event decides the run's outcome. A stream that sent ``RUN_STARTED`` and ends
without either (cut: a dropped connection, a killed recorder) did not finish: its open
records and the run end ``interrupted``.

Steps: ``STEP_STARTED`` / ``STEP_FINISHED`` track the active step (stored on messages as
``step``) and record a ``Step`` of type ``agui_step``.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Any

from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from .._models import MessageStatus, Role
from .._runs import RunStatus, Step, StepStatus
from ._compat import THINKING_EVENTS
from ._fold_extras import ExtraHandlers
from ._fold_nested import NestedHandlers
from ._fold_other import OtherHandlers
from ._fold_snapshot import SnapshotHandlers
from ._state import FoldState, Record
from ._text import utf8_size
from ._writers import BufferedWriter

__all__ = ["AGUI_STEP_TYPE", "EventFolder"]

AGUI_STEP_TYPE = "agui_step"
"""``Step.type`` of the steps recorded from ``STEP_STARTED`` / ``STEP_FINISHED``."""

_MESSAGE_END = {
    RunStatus.COMPLETE: MessageStatus.COMPLETE,
    RunStatus.INTERRUPTED: MessageStatus.INTERRUPTED,
    RunStatus.ERRORED: MessageStatus.ERRORED,
}
_STEP_END = {
    RunStatus.COMPLETE: StepStatus.COMPLETED,
    RunStatus.INTERRUPTED: StepStatus.INTERRUPTED,
    RunStatus.ERRORED: StepStatus.FAILED,
}


class EventFolder(NestedHandlers, ExtraHandlers, SnapshotHandlers, OtherHandlers):
    """Folds a run's AG-UI events into message records and steps (see the module docstring)."""

    @classmethod
    def event_handlers(cls) -> dict[type[BaseEvent], str]:
        """Return the AG-UI event class -> handler-method name table (see ``FoldBase``)."""
        table: dict[type[BaseEvent], str] = {
            RunStartedEvent: "handle_run_lifecycle",
            RunFinishedEvent: "handle_run_lifecycle",
            RunErrorEvent: "handle_run_lifecycle",
            StepStartedEvent: "handle_step",
            StepFinishedEvent: "handle_step",
            StateSnapshotEvent: "handle_state",
            StateDeltaEvent: "handle_state",
            MessagesSnapshotEvent: "handle_messages_snapshot",
            ActivitySnapshotEvent: "handle_activity",
            ActivityDeltaEvent: "handle_activity",
        }
        for text in (
            TextMessageStartEvent,
            TextMessageContentEvent,
            TextMessageEndEvent,
            TextMessageChunkEvent,
        ):
            table[text] = "handle_text_message"
        for tool in (
            ToolCallStartEvent,
            ToolCallArgsEvent,
            ToolCallEndEvent,
            ToolCallResultEvent,
            ToolCallChunkEvent,
        ):
            table[tool] = "handle_tool_call"
        reasoning_events: tuple[type[BaseEvent], ...] = (
            ReasoningStartEvent,
            ReasoningMessageStartEvent,
            ReasoningMessageContentEvent,
            ReasoningMessageEndEvent,
            ReasoningMessageChunkEvent,
            ReasoningEndEvent,
            ReasoningEncryptedValueEvent,
            *THINKING_EVENTS,
        )
        for reasoning in reasoning_events:
            table[reasoning] = "handle_reasoning"
        return table

    # -- run lifecycle ---------------------------------------------------------------------

    async def handle_run_lifecycle(self, state: FoldState, event: BaseEvent) -> None:
        """Note run facts on ``RUN_STARTED``; end every unfinished record on a terminal event.

        ``RUN_FINISHED`` keeps its ``outcome``, ``result`` and token ``usage`` in the run's
        metadata (``agui_outcome``, ``agui_result``, ``agui_usage``); ``RUN_ERROR`` its
        ``code`` (``agui_error_code``), ``usage`` and message (the run's ``error``). The
        ``usage`` also counts in ``agui_token_usage`` (``add_run_usage``).
        """
        if isinstance(event, RunStartedEvent):
            state.run_started = True
            if event.parent_run_id:
                state.run_metadata["agui_parent_run_id"] = event.parent_run_id
            return
        if state.outcome is not None:
            return  # the first terminal event decides; later ones change nothing
        if isinstance(event, RunFinishedEvent):
            outcome = event.outcome
            cancelled = outcome is not None and getattr(outcome, "type", None) == "cancelled"
            for key, value in (
                ("agui_outcome", outcome),
                ("agui_result", event.result),
                ("agui_usage", event.usage),
            ):
                if value is not None:
                    state.run_metadata[key] = _jsonable(value)
            self.add_run_usage(state, state.run_metadata.get("agui_usage"))
            await self.end_run_records(
                state, RunStatus.INTERRUPTED if cancelled else RunStatus.COMPLETE
            )
        elif isinstance(event, RunErrorEvent):
            state.error = event.message or None  # a RUN_ERROR with no text still errors
            if event.code:
                state.run_metadata["agui_error_code"] = event.code
            if event.usage is not None:
                state.run_metadata["agui_usage"] = _jsonable(event.usage)
                self.add_run_usage(state, state.run_metadata["agui_usage"])
            await self.end_run_records(state, RunStatus.ERRORED)

    async def end_run_records(self, state: FoldState, status: RunStatus) -> None:
        """Give every unfinished record and open step the end status of the run."""
        state.outcome = status
        for record in state.unfinished_records():
            await self.finish(state, record, _MESSAGE_END[status])
        for step in list(state.steps.values()):
            if step.status in (StepStatus.PENDING, StepStatus.RUNNING):
                await state.writer.step_changed(
                    state, step.model_copy(update={"status": _STEP_END[status]}), durable=False
                )

    # -- steps -----------------------------------------------------------------------------

    async def handle_step(self, state: FoldState, event: BaseEvent) -> None:
        """Track the active AG-UI step and record it as a ``Step`` of type ``agui_step``."""
        if isinstance(event, StepStartedEvent):
            state.active_steps.append(event.step_name)
            self.count_step_start(state, event.step_name)
            earlier = state.previous_steps.get(self.agui_step_key(state, event.step_name))
            if earlier is not None and earlier.status is StepStatus.COMPLETED:
                state.agui_steps[event.step_name] = earlier.step_id  # re-sent: not stored again
                return
            step = Step(
                chat_id=state.chat.chat_id,
                run_id=state.run_id,
                agent_id=state.agent_id,
                stack_id=state.stack_id,
                type=AGUI_STEP_TYPE,
                status=StepStatus.RUNNING,
                input={"step_name": event.step_name},
                metadata={"key": self.agui_step_key(state, event.step_name)},
            )
            if earlier is not None:
                step = step.model_copy(update={"step_id": earlier.step_id})
            state.agui_steps[event.step_name] = step.step_id
            await state.writer.step_changed(state, step, durable=False)
        elif isinstance(event, StepFinishedEvent):
            names = state.active_steps
            if event.step_name in names:
                del names[len(names) - 1 - names[::-1].index(event.step_name)]
            step_id = state.agui_steps.pop(event.step_name, None)
            if step_id is not None and step_id in state.steps:
                done = state.steps[step_id].model_copy(update={"status": StepStatus.COMPLETED})
                await state.writer.step_changed(state, done, durable=False)

    # -- text ------------------------------------------------------------------------------

    async def handle_text_message(self, state: FoldState, event: BaseEvent) -> None:
        """Fold ``TEXT_MESSAGE_*`` events onto one message record (see the module docstring)."""
        if isinstance(event, TextMessageStartEvent):
            record = await self.text_record(state, event.message_id, event.role, start=True)
            if event.name:
                record.message.metadata = {**record.message.metadata, "agui_name": event.name}
        elif isinstance(event, TextMessageContentEvent):
            await self.append_text(state, event.message_id, event.delta)
        elif isinstance(event, TextMessageEndEvent):
            record = await self.text_record(state, event.message_id, None)
            await self.finish(state, record, MessageStatus.COMPLETE)
        elif isinstance(event, TextMessageChunkEvent):
            await self.fold_text_chunk(state, event)

    async def text_record(
        self, state: FoldState, agui_id: str, role: str | None, *, start: bool = False
    ) -> Record:
        """Return the run's open record for a text message, opening it when needed.

        A start for an id whose record ended begins a new record; a delta for it reopens it.
        """
        record = state.record_for(agui_id)
        if record is None or (start and not record.open):
            record = await self.open_record(
                state, agui_id=agui_id, role=Role(role or "assistant"), reopen=not start
            )
        state.last_key = record.key
        return record

    async def append_text(self, state: FoldState, agui_id: str, delta: str) -> None:
        """Fold a content delta into its message."""
        record = await self.text_record(state, agui_id, None)
        await self.add_delta(state, record, record.content, delta)

    def fold_delta_now(self, state: FoldState, event: BaseEvent) -> bool:
        """Fold a ``TEXT_MESSAGE_CONTENT`` delta without awaiting, when that is the same.

        The per-delta path of a ``buffered`` run (2,000 deltas make one message): when
        the fold's text path is this class's own (:meth:`dispatch`, the handler,
        :meth:`append_text`, :meth:`text_record`, :meth:`add_delta` not overridden), the
        event's message is open, no chunk is pending and the delta fits the store's
        ``max_message_bytes``, what :meth:`dispatch` would do is append the delta to the
        record and mark it dirty, with no store call; this does exactly that.

        Returns:
            ``True`` when the delta was folded; ``False`` leaves the event to
            :meth:`dispatch` (nothing was changed).
        """
        if (
            type(event) is not TextMessageContentEvent
            or not _plain_text_path(type(self))
            or type(state.writer).record_delta is not _BUFFERED_DELTA
            or state.text_chunk is not None
            or state.tool_chunk is not None
        ):
            return False
        record = state.record_for(event.message_id)
        if record is None or not record.open or record.truncated_at is not None:
            return False
        size = utf8_size(event.delta)
        if record.streamed_bytes + size > state.writer.store.max_message_bytes:
            return False
        state.event_timestamp = event.timestamp
        state.last_key = record.key
        record.content.append(event.delta, size)
        record.dirty = True
        return True

    def fold_more_deltas(
        self, state: FoldState, folded: TextMessageContentEvent, pending: deque[Any]
    ) -> int:
        """Fold the deltas of ``folded``'s message that come next, as :meth:`fold_delta_now`.

        Called right after :meth:`fold_delta_now` folded ``folded`` (so the text path is
        the plain one, the writer buffered, no chunk pending, the record open and not
        truncated, and folding deltas changes none of that). Takes the
        ``TEXT_MESSAGE_CONTENT`` events of the same message id from the left of
        ``pending`` while they fit the store's ``max_message_bytes``, in one loop (a
        2,000-delta message is one call, not 2,000 dispatches); the first other event, or
        a delta that would not fit, stays for :meth:`dispatch`.

        Args:
            state: The run's fold state.
            folded: The delta :meth:`fold_delta_now` just folded.
            pending: The events not folded yet, oldest first; folded ones are popped.

        Returns:
            How many events were folded.
        """
        if not pending:
            return 0
        agui_id = folded.message_id
        record = state.record_for(agui_id)
        assert record is not None
        room = state.writer.store.max_message_bytes - record.streamed_bytes
        # One pass picks the deltas of the message that come next; their size is measured
        # on the joined text (the UTF-8 size of a concatenation is the sum of the sizes).
        # An attribute of a pydantic model costs a few hundred instructions, so each event
        # is read twice, not four times.
        deltas: list[str] = []
        append = deltas.append
        for event in pending:
            if type(event) is not TextMessageContentEvent or event.message_id != agui_id:
                break
            append(event.delta)
        count = len(deltas)
        if not count:
            return 0
        text = "".join(deltas)
        size = len(text) if text.isascii() else utf8_size(text)
        if size > room:  # dispatch truncates the record at the delta that does not fit
            count, size = _fitting(deltas, room)
            if not count:
                return 0
            text = "".join(deltas[:count])
        state.event_timestamp = pending[count - 1].timestamp
        _pop_left(pending, count)
        if text:
            record.content.extend([text], size)
        record.dirty = True
        return count

    async def fold_text_chunk(self, state: FoldState, event: TextMessageChunkEvent) -> None:
        """Fold a ``TEXT_MESSAGE_CHUNK`` (a new id, or the first chunk, opens a message)."""
        current = state.records.get(state.text_chunk) if state.text_chunk else None
        if current is not None and event.message_id not in (None, current.message.agui_id):
            await self.close_text_chunk(state)
            current = None
        if current is not None:
            record = current
        elif event.message_id:
            record = await self.text_record(state, event.message_id, event.role)
        else:
            role = Role(event.role or "assistant")
            record = await self.open_record(state, agui_id=None, role=role)
        state.text_chunk = state.last_key = record.key
        if event.delta:
            await self.add_delta(state, record, record.content, event.delta)

    async def close_text_chunk(self, state: FoldState) -> None:
        """End the message a chunk opened."""
        key, state.text_chunk = state.text_chunk, None
        record = state.records.get(key) if key is not None else None
        if record is not None and record.open:
            await self.finish(state, record, MessageStatus.COMPLETE)

    async def close_chunks(self, state: FoldState, event: BaseEvent) -> None:
        """End chunk-opened messages and tool calls when another kind of event arrives.

        A ``RUN_ERROR`` does not: chunks have no end event, so the record streaming when
        the run failed was cut by the failure and ends ``errored`` with the run's other
        open records, as a ``TEXT_MESSAGE_START`` without its ``END`` does.
        """
        if isinstance(event, RunErrorEvent):
            return
        if state.text_chunk is not None and not isinstance(event, TextMessageChunkEvent):
            await self.close_text_chunk(state)
        if state.tool_chunk is not None and not isinstance(event, ToolCallChunkEvent):
            agui_id, state.tool_chunk = state.tool_chunk, None
            await self.end_tool_call(state, agui_id)


def _fitting(deltas: list[str], room: int) -> tuple[int, int]:
    """How many of ``deltas`` fit in ``room`` UTF-8 bytes, in order, and their size."""
    size = 0
    for count, delta in enumerate(deltas):
        n = utf8_size(delta)
        if size + n > room:
            return count, size
        size += n
    return len(deltas), size


def _pop_left(pending: deque[Any], count: int) -> None:
    """Drop the first ``count`` items of ``pending`` (O(count), never O(len(pending)) more)."""
    rest = len(pending) - count
    if rest <= count:  # few left (the message's end, the run's): keep those
        kept = list(islice(pending, count, None))
        pending.clear()
        pending.extend(kept)
    else:
        popleft = pending.popleft
        for _ in range(count):
            popleft()


_BUFFERED_DELTA = BufferedWriter.record_delta
_TEXT_PATH = ("dispatch", "handle_text_message", "append_text", "text_record", "add_delta")


_PLAIN_TEXT_PATH: dict[type[EventFolder], bool] = {}


def _plain_text_path(cls: type[EventFolder]) -> bool:
    """Whether ``cls`` folds text deltas with :class:`EventFolder`'s own methods."""
    plain = _PLAIN_TEXT_PATH.get(cls)
    if plain is None:
        plain = cls.handler_name(TextMessageContentEvent) == "handle_text_message" and all(
            getattr(cls, name) is getattr(EventFolder, name) for name in _TEXT_PATH
        )
        _PLAIN_TEXT_PATH[cls] = plain
    return plain


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value
