"""Tool calls and reasoning: the nested records of a message.

Tool calls live in their parent message (``parentMessageId``); a call naming no parent joins
the run's latest assistant message, else a message the fold opens for it (so parallel calls
of one model turn share one message, as AG-UI clients send them back). A parent that is not
an assistant message (a tool result, a reasoning) gets an assistant message opened for it.
A tool result (``TOOL_CALL_RESULT``) is a ``tool`` message whose ``tool_call_ref`` is the
call's id.

Reasoning lives in a ``reasoning`` message: ``REASONING_START`` opens it, each
``REASONING_MESSAGE_*`` sequence is one nested ``Reasoning`` with its deltas folded. The
deprecated ``THINKING_*`` events map one to one (``THINKING_START`` ->
``REASONING_START``, ``THINKING_TEXT_MESSAGE_*`` -> ``REASONING_MESSAGE_*``, the oldest
``THINKING_CONTENT`` -> content); they carry no ids, so their records get none, and
``THINKING_START``'s ``title`` names the reasoning.
"""

from __future__ import annotations

import logging
from uuid import UUID

from ag_ui.core import (
    BaseEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from .._models import MessageStatus, Role
from ._compat import (
    ThinkingContentEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ThinkingTextMessageContentEvent,
    ThinkingTextMessageEndEvent,
    ThinkingTextMessageStartEvent,
)
from ._dialects import tool_outcome
from ._fold_base import FoldBase
from ._state import FoldState, Record
from ._text import TextBuffer
from ._translate import parts_from_agui

__all__ = ["NestedHandlers"]

_log = logging.getLogger("threadkeep.agui")


class NestedHandlers(FoldBase):
    """``handle_tool_call`` and ``handle_reasoning``."""

    # -- tool calls ------------------------------------------------------------------------

    async def handle_tool_call(self, state: FoldState, event: BaseEvent) -> None:
        """Fold ``TOOL_CALL_*`` events onto a tool call nested in its message.

        ``ARGS`` deltas fold into the call's ``arguments`` (the exact string); ``END`` completes
        it; ``RESULT`` stores a ``tool`` message; ``CHUNK`` opens the call on its first chunk.
        """
        if isinstance(event, ToolCallStartEvent):
            await self.start_tool_call(
                state,
                event.tool_call_id,
                event.tool_call_name,
                event.parent_message_id,
                start=True,
            )
        elif isinstance(event, ToolCallArgsEvent):
            await self.append_tool_args(state, event.tool_call_id, event.delta)
        elif isinstance(event, ToolCallEndEvent):
            await self.end_tool_call(state, event.tool_call_id)
        elif isinstance(event, ToolCallResultEvent):
            await self.store_tool_result(state, event)
        elif isinstance(event, ToolCallChunkEvent):
            await self.fold_tool_chunk(state, event)

    async def start_tool_call(
        self,
        state: FoldState,
        agui_id: str,
        name: str,
        parent_id: str | None,
        *,
        start: bool = False,
    ) -> tuple[Record, UUID]:
        """Open a tool call (or return the run's call with this id) in its host message.

        A start for an id whose call ended begins a new call (a model turn numbering its
        calls ``call_0``, ``call_1``... again): the new call keeps the id, later events
        of the id go to it. Without ``start`` (an arguments delta or an end) the run's call
        with this id is returned, ended or not.

        Args:
            state: The run's fold state.
            agui_id: The AG-UI tool call id.
            name: The tool's name (for a new call).
            parent_id: The AG-UI id of the message the call belongs in, if named.
            start: The event starts a call (``TOOL_CALL_START``, a chunk opening a call).

        Returns:
            ``(host record, tool_call_id)``.
        """
        if agui_id in state.tool_hosts:
            key, call_id = state.tool_hosts[agui_id]
            known = state.records[key]
            if not start or known.tool_call(call_id).status is MessageStatus.ACTIVE:
                return known, call_id
        host = await self.tool_host(state, parent_id)
        call = self.build_tool_call_create(state, agui_id=agui_id, name=name)
        host.message.tool_calls = [*host.message.tool_calls, call]
        host.tool_args[call.tool_call_id] = TextBuffer()
        if host.tool_host and not host.open:
            host.open, host.message.in_progress = True, True
            host.message.status = MessageStatus.ACTIVE
        state.tool_hosts[agui_id] = (host.key, call.tool_call_id)
        state.last_key = host.key
        await self.boundary(state, host)
        return host, call.tool_call_id

    async def tool_host(self, state: FoldState, parent_id: str | None) -> Record:
        """Return the message a new tool call belongs in (see the module docstring).

        A tool call belongs in an assistant message. A ``parentMessageId`` naming a record
        of another role (older Pydantic AI names the tool result it just sent; some stacks
        name a reasoning or activity message) gets an assistant message the fold opens for
        it, shared by every call naming that parent.
        """
        if parent_id:
            parent = state.record_for(parent_id)
            if parent is not None and _plain_assistant(parent):
                return parent
            if parent is None:
                return await self.open_record(
                    state, agui_id=parent_id, role=Role.ASSISTANT, tool_host=True
                )
            host = state.records.get(state.foster_hosts.get(parent.key, ""))
            if host is None:
                host = await self.open_record(
                    state, agui_id=None, role=Role.ASSISTANT, tool_host=True
                )
                state.foster_hosts[parent.key] = host.key
            return host
        last = state.records.get(state.last_key) if state.last_key else None
        if last is not None and _plain_assistant(last):
            return last
        return await self.open_record(state, agui_id=None, role=Role.ASSISTANT, tool_host=True)

    async def append_tool_args(self, state: FoldState, agui_id: str, delta: str) -> None:
        """Fold an arguments delta (opening the call, unnamed, if it never started)."""
        host, call_id = await self.start_tool_call(state, agui_id, "", None)
        await self.add_delta(state, host, host.tool_args[call_id], delta)

    async def end_tool_call(self, state: FoldState, agui_id: str) -> None:
        """Complete a tool call; a host the fold opened completes with its last call."""
        host, call_id = await self.start_tool_call(state, agui_id, "", None)
        host.tool_call(call_id).status = MessageStatus.COMPLETE
        active = [c for c in host.message.tool_calls if c.status is MessageStatus.ACTIVE]
        if host.tool_host and not active:
            await self.finish(state, host, MessageStatus.COMPLETE)
        else:
            await self.boundary(state, host)

    async def store_tool_result(self, state: FoldState, event: ToolCallResultEvent) -> None:
        """Store a tool result as a ``tool`` message answering ``event.tool_call_id``.

        The same result sent again (same id, same call, same content: a retry) is one
        message; an id used again with another result (a later turn's) is a new one.
        """
        text, parts = parts_from_agui(event.content)
        known = state.record_for(event.message_id)
        if (
            known is not None
            and known.message.role is Role.TOOL
            and known.message.tool_call_ref == event.tool_call_id
            and known.content.text() == text
            and known.message.parts == parts
        ):
            return
        record = await self.open_record(
            state, agui_id=event.message_id, role=Role.TOOL, write=False, reopen=False
        )
        record.content = TextBuffer(text)
        record.message.parts = parts
        record.message.tool_call_ref = event.tool_call_id
        state.last_key = record.key
        await self.finish(state, record, MessageStatus.COMPLETE)

    async def fold_tool_chunk(self, state: FoldState, event: ToolCallChunkEvent) -> None:
        """Fold a ``TOOL_CALL_CHUNK``: a new id (or the first chunk) opens a call."""
        agui_id = event.tool_call_id or state.tool_chunk
        if agui_id is None:
            _log.warning("threadkeep: TOOL_CALL_CHUNK without a toolCallId and no open call")
            return
        if state.tool_chunk is not None and agui_id != state.tool_chunk:
            await self.end_tool_call(state, state.tool_chunk)
        # The first chunk of a call names the tool: with an id whose call ended, a new call.
        starts = agui_id != state.tool_chunk and bool(event.tool_call_name)
        state.tool_chunk = agui_id
        await self.start_tool_call(
            state, agui_id, event.tool_call_name or "", event.parent_message_id, start=starts
        )
        if event.delta:
            await self.append_tool_args(state, agui_id, event.delta)

    # -- reasoning -------------------------------------------------------------------------

    async def handle_reasoning(self, state: FoldState, event: BaseEvent) -> None:
        """Fold ``REASONING_*`` and deprecated ``THINKING_*`` events (mapped one to one)."""
        if isinstance(event, ReasoningStartEvent | ThinkingStartEvent):
            await self.end_unended_phase(state, getattr(event, "message_id", None))
            # opened at its first content: a start and end with nothing between is noise
            state.pending_reasoning = (
                getattr(event, "message_id", None),
                getattr(event, "title", None),
            )
        elif isinstance(event, ReasoningMessageStartEvent):
            await self.start_reasoning(state, event.message_id)
        elif isinstance(event, ThinkingTextMessageStartEvent):
            await self.start_reasoning(state, None)
        elif isinstance(event, ReasoningMessageContentEvent | ReasoningMessageChunkEvent):
            await self.append_reasoning(state, event.message_id, event.delta or "")
        elif isinstance(event, ThinkingTextMessageContentEvent | ThinkingContentEvent):
            await self.append_reasoning(state, None, event.delta)
        elif isinstance(event, ReasoningMessageEndEvent | ThinkingTextMessageEndEvent):
            await self.end_reasoning(state, getattr(event, "message_id", None))
        elif isinstance(event, ReasoningEndEvent | ThinkingEndEvent):
            await self.end_reasoning_host(state)
        elif isinstance(event, ReasoningEncryptedValueEvent):
            await self.store_encrypted_value(state, event)

    async def reasoning_host(
        self, state: FoldState, agui_id: str | None, title: str | None = None
    ) -> Record:
        """Return the open reasoning message (opening one for ``agui_id`` when needed)."""
        if state.pending_reasoning is not None:  # the phase's start names the message
            (agui_id, pending_title), state.pending_reasoning = state.pending_reasoning, None
            title = pending_title or title
        current = state.records.get(state.open_reasoning_host or "")
        if current is not None and current.open and (not agui_id or current.key == agui_id):
            return current
        host = await self.open_record(state, agui_id=agui_id, role=Role.REASONING)
        host.title = title or host.title
        state.open_reasoning_host = host.key
        state.last_key = host.key
        return host

    async def start_reasoning(self, state: FoldState, agui_id: str | None) -> tuple[Record, UUID]:
        """Open a nested reasoning (or return the run's reasoning with this id)."""
        if agui_id and agui_id in state.reasoning_hosts:
            key, reasoning_id = state.reasoning_hosts[agui_id]
            state.current_reasoning = (key, reasoning_id)
            return state.records[key], reasoning_id
        current = state.records.get(state.open_reasoning_host or "")
        if current is not None and current.open and state.pending_reasoning is None:
            host = current  # a reasoning phase may hold several reasoning messages
        else:
            host = await self.reasoning_host(state, agui_id)
        reasoning = self.build_reasoning_create(state, agui_id=agui_id, name=host.title)
        host.message.reasonings = [*host.message.reasonings, reasoning]
        host.reasoning_text[reasoning.reasoning_id] = TextBuffer()
        if agui_id:
            state.reasoning_hosts[agui_id] = (host.key, reasoning.reasoning_id)
        state.current_reasoning = (host.key, reasoning.reasoning_id)
        await self.boundary(state, host)
        return host, reasoning.reasoning_id

    async def current_or_start(self, state: FoldState, agui_id: str | None) -> tuple[Record, UUID]:
        """Return the reasoning a delta belongs to: by id, else the current one, else a new one."""
        if agui_id and agui_id in state.reasoning_hosts:
            key, reasoning_id = state.reasoning_hosts[agui_id]
            return state.records[key], reasoning_id
        if not agui_id and state.current_reasoning is not None:
            key, reasoning_id = state.current_reasoning
            return state.records[key], reasoning_id
        return await self.start_reasoning(state, agui_id)

    async def append_reasoning(self, state: FoldState, agui_id: str | None, delta: str) -> None:
        """Fold a reasoning delta."""
        host, reasoning_id = await self.current_or_start(state, agui_id)
        await self.add_delta(state, host, host.reasoning_text[reasoning_id], delta)

    async def end_reasoning(self, state: FoldState, agui_id: str | None) -> None:
        """Complete a nested reasoning."""
        host, reasoning_id = await self.current_or_start(state, agui_id)
        host.reasoning(reasoning_id).status = MessageStatus.COMPLETE
        state.current_reasoning = None
        await self.boundary(state, host)

    async def end_unended_phase(self, state: FoldState, agui_id: str | None) -> None:
        """End the open reasoning message when another phase starts (its end never came).

        A stack that leaves out ``REASONING_END``/``THINKING_END`` still starts each phase:
        the next phase's start ends the previous one ``complete``, so it is stored as its own
        reasoning message rather than swallowed by the previous one. The same id again (a
        repeated start) keeps the phase open.
        """
        host = state.records.get(state.open_reasoning_host or "")
        if host is not None and host.open and (agui_id is None or host.key != agui_id):
            await self.end_reasoning_host(state)

    async def end_reasoning_host(self, state: FoldState) -> None:
        """Complete the open reasoning message and its reasonings."""
        host = state.records.get(state.open_reasoning_host or "")
        state.open_reasoning_host = state.current_reasoning = state.pending_reasoning = None
        if host is not None:
            await self.finish(state, host, MessageStatus.COMPLETE)

    async def store_encrypted_value(
        self, state: FoldState, event: ReasoningEncryptedValueEvent
    ) -> None:
        """Attach an encrypted reasoning value to the reasoning, message or tool call it names.

        ``subtype="tool-call"``: the call's ``encrypted_value`` (an extra field of
        ``ToolCall``); ``subtype="message"``: the reasoning's ``encrypted_value``, or for any
        other message ``metadata["agui_encrypted_value"]`` (a tool result's outcome in it
        sets its status: ``_dialects.tool_outcome``). An id the run does not know is
        kept in the run's metadata rather than dropped.
        """
        entity = event.entity_id
        if event.subtype == "tool-call" and entity in state.tool_hosts:
            key, call_id = state.tool_hosts[entity]
            host = state.records[key]
            host.message.tool_calls = [
                c.model_copy(update={"encrypted_value": event.encrypted_value})
                if c.tool_call_id == call_id
                else c
                for c in host.message.tool_calls
            ]
            await self.boundary(state, host)
        elif entity in state.reasoning_hosts:
            key, reasoning_id = state.reasoning_hosts[entity]
            state.records[key].reasoning(reasoning_id).encrypted_value = event.encrypted_value
            await self.boundary(state, state.records[key])
        elif (host_reasoning := await self.phase_reasoning(state, entity)) is not None:
            host, reasoning_id = host_reasoning  # Anthropic's redacted_thinking: no text
            host.reasoning(reasoning_id).encrypted_value = event.encrypted_value
            await self.boundary(state, host)
        elif (record := state.record_for(entity)) is not None:
            record.message.metadata = {
                **record.message.metadata,
                "agui_encrypted_value": event.encrypted_value,
            }
            outcome = tool_outcome(event.encrypted_value)  # Pydantic AI's failed tool
            if outcome is not None and record.message.role is Role.TOOL:
                record.message.status = MessageStatus(outcome)
            await self.boundary(state, record)
        else:
            unmatched = state.run_metadata.setdefault("agui_encrypted_values", {})
            unmatched[entity] = {"subtype": event.subtype, "value": event.encrypted_value}

    async def phase_reasoning(self, state: FoldState, agui_id: str) -> tuple[Record, UUID] | None:
        """Return the reasoning of the phase ``REASONING_START`` opened as ``agui_id``, if any.

        A phase still without content gets its reasoning now; a phase's message holding
        reasonings gives its latest. ``None`` when ``agui_id`` names no reasoning phase.
        """
        if state.pending_reasoning is not None and state.pending_reasoning[0] == agui_id:
            return await self.start_reasoning(state, None)
        record = state.record_for(agui_id)
        if record is None or record.message.role is not Role.REASONING:
            return None
        if record.message.reasonings:
            return record, record.message.reasonings[-1].reasoning_id
        return None


def _plain_assistant(record: Record) -> bool:
    message = record.message
    return message.role is Role.ASSISTANT and message.metadata.get("agui_role") != "activity"
