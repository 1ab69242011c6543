"""``MESSAGES_SNAPSHOT`` reconciled with what the run streamed (issue 11).

A snapshot and the stream describe the same conversation, so a snapshot message is matched
to what is known before anything is stored:

1. a record of this run: by message id; an assistant message by the id of a tool call it
   carries (streamed as ``TOOL_CALL_*``), or by an id that is a streamed call's; a tool
   message by its ``toolCallId`` (the run's tool message answering that call); a reasoning
   message by its id;
2. a message stored before (an earlier run, or this run's input): by id as a message, a
   nested tool call or reasoning; an assistant message whose every tool call is stored; a
   tool message answering a call with the text a message the run began with answers it
   with (ADK mints fresh ids for every message of every snapshot);
3. a user, assistant, system or developer message whose id names nothing known (LlamaIndex
   and other adapters mint a fresh id for every message of every snapshot): the first record
   of this run, then the first message the run began with (its context and input), of the
   same role and the same text and parts that no other message of this snapshot took.

An assistant message matching nothing that carries nothing (no text, no tool call) is not
stored.

A matched record is reconciled, never stored twice. For its text (and each tool call's
argument string): where the streamed text is a strict prefix of the snapshot's (the stream
was cut short) the snapshot's text is stored; where they disagree otherwise the streamed
text stays and the snapshot's is kept in ``metadata["agui_snapshot"]`` (``{"content": ...}``
and ``{"tool_calls": {<call id>: <arguments>}}``), except for tool call arguments whose
streamed text is not JSON while the snapshot's is (the stream lost a piece of them, as
``ag-ui-langgraph`` drops the arguments carried by the chunk that opens a call): those take
the snapshot's, and the streamed text is kept in ``{"streamed_tool_calls": {<call id>:
<arguments>}}``. A tool call the snapshot names that was
not streamed joins the message. A message matching nothing is stored, complete, in
snapshot order; one stored before is left as it is.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    ActivityMessage,
    AssistantMessage,
    BaseEvent,
    DeveloperMessage,
    MessagesSnapshotEvent,
    ReasoningMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

from .._models import MessageStatus, Role, ToolCall
from ._fold_base import FoldBase
from ._state import REUSED_ID_NOTE, FoldState, Record
from ._text import SNAPSHOT_NOTE, TextBuffer, held_texts, repair_surrogates, repair_value
from ._translate import AguiMessage, message_from_agui, parts_from_agui

__all__ = ["SNAPSHOT_NOTE", "SnapshotHandlers"]


class SnapshotHandlers(FoldBase):
    """``handle_messages_snapshot`` (see the module docstring)."""

    async def handle_messages_snapshot(self, state: FoldState, event: BaseEvent) -> None:
        """Reconcile each snapshot message with the run and the chat; store the rest."""
        if not isinstance(event, MessagesSnapshotEvent):
            return
        messages = list(event.messages)
        matched = [self.snapshot_match(state, m) for m in messages]
        claimed = {r.key for r in matched if r is not None}
        ids = {m.id for m in messages}
        taken = {
            h.message_id
            for h in state.history
            if h.agui_id in ids or h.metadata.get(REUSED_ID_NOTE) in ids
        }
        last: str | None = None
        for message, by_id in zip(messages, matched, strict=True):
            last = None
            record = by_id
            if record is None and not await self.snapshot_stored(state, message):
                record = self.same_content_record(state, message, claimed)
                if record is None:
                    if self.same_content_history(state, message, taken) or _empty(message):
                        continue
                    last = (await self.store_snapshot_message(state, message)).key
                    continue
            if record is not None:
                claimed.add(record.key)
                await self.reconcile(state, record, message)
                last = record.key
        # The snapshot's last message is the conversation's latest: a tool call naming no
        # parent after a snapshot ending in a tool result starts a new assistant message.
        state.last_key = last

    def same_content_record(
        self, state: FoldState, message: AguiMessage, claimed: set[str]
    ) -> Record | None:
        """Return the run's first unclaimed record with the message's role, text and parts.

        Rule 3 of the module docstring, for a snapshot message whose id names nothing.
        """
        if not isinstance(message, _BY_CONTENT):
            return None
        text, parts = _sent(message)
        for record in state.records.values():
            if (
                record.key not in claimed
                and record.message.role.value == message.role
                and record.message.metadata.get("agui_role") != "activity"
                and repair_surrogates(record.content.text() or record.message.content)[0] == text
                and [p.model_dump() for p in record.message.parts] == parts
            ):
                return record
        return None

    def same_content_history(self, state: FoldState, message: AguiMessage, taken: set[Any]) -> bool:
        """Whether a message the run began with is this snapshot message (rule 3).

        The first one of the same role, text and parts not in ``taken`` is taken.
        """
        if not isinstance(message, _BY_CONTENT):
            return False
        text, parts = _sent(message)
        for stored in state.history:
            if (
                stored.message_id not in taken
                and stored.role.value == message.role
                and text in held_texts(stored)
                and [p.model_dump() for p in stored.parts] == parts
            ):
                taken.add(stored.message_id)
                return True
        return False

    def snapshot_match(self, state: FoldState, message: AguiMessage) -> Record | None:
        """Return the run's record a snapshot message describes, or ``None`` (rule 1)."""
        record = state.record_for(message.id)
        if record is not None:
            return record
        if _began_with(state, message.id):
            # A message the run began with is that earlier message, even where its id is
            # also a call id of this run: clients name a parentless call's message by the
            # call's id, and providers number calls per turn (call_0 in every run).
            return None
        return self.host_match(state, message)

    def host_match(self, state: FoldState, message: AguiMessage) -> Record | None:
        """The run's record hosting the message's id as a call or reasoning, or its calls."""
        if message.id in state.tool_hosts:
            return state.records[state.tool_hosts[message.id][0]]
        if message.id in state.reasoning_hosts:
            return state.records[state.reasoning_hosts[message.id][0]]
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or []:
                if call.id in state.tool_hosts:
                    return state.records[state.tool_hosts[call.id][0]]
        if isinstance(message, ToolMessage) and message.tool_call_id:
            answers = [
                r
                for r in state.records.values()
                if r.message.role is Role.TOOL and r.message.tool_call_ref == message.tool_call_id
            ]
            return answers[-1] if answers else None
        return None

    async def snapshot_stored(self, state: FoldState, message: AguiMessage) -> bool:
        """Whether the chat holds a snapshot message from before this run (rule 2)."""
        store = state.writer.store
        chat_id = state.chat.chat_id
        if message.id in state.inbound_ids:
            return True
        if await store.get_message_by_agui_id(chat_id, message.id) is not None:
            return True
        if await store.get_tool_call_by_agui_id(chat_id, message.id) is not None:
            return True
        if await store.get_reasoning_by_agui_id(chat_id, message.id) is not None:
            return True
        if isinstance(message, ToolMessage):
            return _answered_before(state, message)
        calls = message.tool_calls or [] if isinstance(message, AssistantMessage) else []
        return bool(calls) and all(
            [await store.get_tool_call_by_agui_id(chat_id, c.id) for c in calls]
        )

    async def store_snapshot_message(self, state: FoldState, message: AguiMessage) -> Record:
        """Store a snapshot message nothing matched, complete; return its record."""
        stored = message_from_agui(message, run_id=state.run_id)
        record = await self.open_record(state, agui_id=message.id, role=stored.role, write=False)
        stored.message_id = record.message.message_id
        stored.agui_id = record.message.agui_id
        stored.metadata = {**record.message.metadata, **stored.metadata}
        stored.step = state.active_step
        record.message = stored
        for call in stored.tool_calls:
            if call.agui_id:
                state.tool_hosts.setdefault(call.agui_id, (record.key, call.tool_call_id))
        await self.finish(state, record, MessageStatus.COMPLETE)
        return record

    async def reconcile(self, state: FoldState, record: Record, message: AguiMessage) -> None:
        """Apply the strict-prefix rule to a matched record's text and tool calls."""
        note: dict[str, Any] = {}
        content = getattr(message, "content", None)
        if not isinstance(message, ReasoningMessage | ActivityMessage) and content is not None:
            text, _ = parts_from_agui(content)
            if text and not _merge(record.content, text):
                note["content"] = text
        if isinstance(message, AssistantMessage):
            disagreeing, replaced = self.reconcile_calls(state, record, message)
            if disagreeing:
                note["tool_calls"] = disagreeing
            if replaced:
                note["streamed_tool_calls"] = replaced
        if note:
            record.message.metadata = {**record.message.metadata, SNAPSHOT_NOTE: note}
        await self.boundary(state, record)

    def reconcile_calls(
        self, state: FoldState, record: Record, message: AssistantMessage
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Reconcile a snapshot's tool calls with the record's.

        Returns:
            ``(disagreeing, replaced)``: the snapshot's arguments of calls whose streamed
            arguments stay, and the streamed arguments of calls that took the snapshot's
            (streamed text that is not JSON where the snapshot's is: the stream lost a
            piece, as ``ag-ui-langgraph`` drops the arguments of the chunk opening a call).
        """
        disagreeing: dict[str, str] = {}
        replaced: dict[str, str] = {}
        for call in message.tool_calls or []:
            known = state.tool_hosts.get(call.id)
            arguments = call.function.arguments
            if known is None:
                new = ToolCall(
                    agui_id=call.id,
                    name=call.function.name,
                    arguments=arguments,
                    status=MessageStatus.COMPLETE,
                )
                record.message.tool_calls = [*record.message.tool_calls, new]
                state.tool_hosts[call.id] = (record.key, new.tool_call_id)
                continue
            host = state.records[known[0]]
            buffer = host.tool_args.get(known[1])
            if buffer is None:
                buffer = host.tool_args[known[1]] = TextBuffer(host.tool_call(known[1]).arguments)
            if arguments and not _merge(buffer, arguments):
                streamed = buffer.text()
                if _is_json(arguments) and not _is_json(streamed):
                    whole = host.tool_args[known[1]] = TextBuffer()
                    whole.append(arguments)
                    host.dirty = True
                    replaced[call.id] = streamed
                else:
                    disagreeing[call.id] = arguments
            if not host.tool_call(known[1]).name:
                host.tool_call(known[1]).name = call.function.name
        return disagreeing, replaced


_BY_CONTENT = (UserMessage, AssistantMessage, SystemMessage, DeveloperMessage)


def _sent(message: AguiMessage) -> tuple[str, list[dict[str, Any]]]:
    """A snapshot message's text and parts as they are stored (lone surrogates as U+FFFD)."""
    text, parts = parts_from_agui(getattr(message, "content", None))
    dumped, _ = repair_value([p.model_dump() for p in parts])
    return repair_surrogates(text)[0], dumped


def _empty(message: AguiMessage) -> bool:
    """An assistant message with no text and no tool call (it carries nothing to store)."""
    return isinstance(message, AssistantMessage) and not message.content and not message.tool_calls


def _began_with(state: FoldState, agui_id: str) -> bool:
    """Whether ``agui_id`` names a message of the run's input or the chat's context."""
    if agui_id in state.inbound_ids:
        return True
    return any(
        h.agui_id == agui_id or h.metadata.get(REUSED_ID_NOTE) == agui_id for h in state.history
    )


def _answered_before(state: FoldState, message: ToolMessage) -> bool:
    """A message the run began with answers the same call with the same text (rule 2)."""
    if not message.tool_call_id:
        return False
    text, _ = parts_from_agui(message.content)
    return any(
        h.role is Role.TOOL and h.tool_call_ref == message.tool_call_id and text in held_texts(h)
        for h in state.history
    )


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _merge(buffer: TextBuffer, snapshot: str) -> bool:
    """Apply the strict-prefix rule; return whether the texts now agree.

    Both texts are compared as they will be stored: a surrogate pair split across two
    deltas (JavaScript stacks split by UTF-16 code unit) is one character, as the
    snapshot's JSON string decodes it, and a lone surrogate is U+FFFD on both sides (the
    snapshot repeating the stream's lone surrogate agrees with it).
    """
    streamed, _ = repair_surrogates(buffer.text())
    wanted, _ = repair_surrogates(snapshot)
    if streamed == wanted:
        return True
    if wanted.startswith(streamed):
        buffer.append(wanted[len(streamed) :])
        return True
    return False
