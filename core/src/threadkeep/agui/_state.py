"""What the fold holds while a run streams: one :class:`Record` per message being built.

A record is a whole message (one stored record per message, its tool calls and
reasonings nested inside it). Streamed text lives in :class:`TextBuffer` s until a snapshot
is taken,
so a 2,000-delta message is one record written a few times, never a row per delta.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from .._models import Chat, Message, MessageStatus, Reasoning, ToolCall
from .._runs import Run, RunStatus, Step
from ._text import SURROGATES_NOTE, TextBuffer, repair_surrogates, repair_value, storable

if TYPE_CHECKING:
    from ._writers import RunWriter

__all__ = ["REUSED_ID_NOTE", "SURROGATES_NOTE", "TRUNCATED_NOTE", "FoldState", "Record"]


TRUNCATED_NOTE = "truncated"
"""``Message.metadata`` key of a message whose streamed text passed ``max_message_bytes``:
``{"kept_bytes": n, "dropped_bytes": m}`` (UTF-8 bytes of streamed text kept and dropped)."""

REUSED_ID_NOTE = "agui_id"
"""``Message.metadata`` key keeping an AG-UI id the message could not store as its ``agui_id``."""


@dataclass(eq=False)
class Record:
    """One message under construction.

    Attributes:
        message: The message without its streamed text (role, ids, status, nested records).
        key: Its key in ``FoldState.records`` (the AG-UI id, or an internal key).
        content: The streamed ``content``.
        tool_args: Streamed ``arguments`` per nested tool call (by ``tool_call_id``).
        reasoning_text: Streamed ``content`` per nested reasoning (by ``reasoning_id``).
        open: Still receiving events (``False`` once ended, complete or not).
        stored: Appended to the store (later writes replace it).
        dirty: Changed since the last successful write.
        tool_host: Made by the fold to hold tool calls that named no (known) parent message;
            its status follows its calls.
        title: ``THINKING_START``'s title, the name of reasonings opened in this host.
        truncated_at: Set once its streamed text reached the store's ``max_message_bytes``:
            the UTF-8 bytes kept (later deltas are dropped; the record ends ``errored``).
        dropped_bytes: UTF-8 bytes of the deltas dropped since.
        replayed: A resumed run re-sent a message an earlier attempt stored complete; its
            events are folded here and never written.
    """

    message: Message
    key: str
    content: TextBuffer = field(default_factory=TextBuffer)
    tool_args: dict[UUID, TextBuffer] = field(default_factory=dict)
    reasoning_text: dict[UUID, TextBuffer] = field(default_factory=dict)
    open: bool = True
    stored: bool = False
    dirty: bool = True
    tool_host: bool = False
    title: str | None = None
    truncated_at: int | None = None
    dropped_bytes: int = 0
    replayed: bool = False

    def buffers(self) -> list[TextBuffer]:
        """Every text buffer of the record."""
        return [self.content, *self.tool_args.values(), *self.reasoning_text.values()]

    @property
    def pending_bytes(self) -> int:
        """UTF-8 bytes streamed since the last successful write."""
        total = self.content.pending_bytes  # read per delta: no list built for one buffer
        if self.tool_args or self.reasoning_text:
            total += sum(b.pending_bytes for b in self.buffers()[1:])
        return total

    @property
    def streamed_bytes(self) -> int:
        """UTF-8 bytes of streamed text the record holds (written or not)."""
        content = self.content
        total = content.pending_bytes + content.flushed_bytes
        if self.tool_args or self.reasoning_text:
            total += sum(b.pending_bytes + b.flushed_bytes for b in self.buffers()[1:])
        return total

    @property
    def flushed_bytes(self) -> int:
        """UTF-8 bytes already written."""
        total = self.content.flushed_bytes
        if self.tool_args or self.reasoning_text:
            total += sum(b.flushed_bytes for b in self.buffers()[1:])
        return total

    def mark_flushed(self) -> None:
        """Record a successful write of the current state."""
        for buffer in self.buffers():
            buffer.mark_flushed()
        self.dirty = False

    def tool_call(self, tool_call_id: UUID) -> ToolCall:
        """Return the nested tool call with this id."""
        return next(c for c in self.message.tool_calls if c.tool_call_id == tool_call_id)

    def reasoning(self, reasoning_id: UUID) -> Reasoning:
        """Return the nested reasoning with this id."""
        return next(r for r in self.message.reasonings if r.reasoning_id == reasoning_id)

    def snapshot(self) -> Message:
        """Return the message with its streamed text, lone surrogates replaced and noted.

        Streamed text is repaired as a whole (a pair split across deltas is joined), then
        every other string of the message (ids, names, ``step``, metadata, parts...).
        A message with no lone surrogate anywhere (the common case, :func:`storable`) is
        a copy of the record's message with its text set, nothing walked or validated again.
        """
        quick = self._quick_snapshot()
        if quick is not None:
            return quick
        data = self.message.model_dump()
        replaced = 0
        data["content"], count = repair_surrogates(self.content.text() or data["content"])
        replaced += count
        for call in data["tool_calls"]:
            buffer = self.tool_args.get(call["tool_call_id"])
            if buffer is not None:
                call["arguments"], count = repair_surrogates(buffer.text())
                replaced += count
        for reasoning in data["reasonings"]:
            buffer = self.reasoning_text.get(reasoning["reasoning_id"])
            if buffer is not None:
                reasoning["content"], count = repair_surrogates(buffer.text())
                replaced += count
        data, count = repair_value(data)
        replaced += count
        if replaced:
            data["metadata"] = {**data["metadata"], SURROGATES_NOTE: replaced}
        if self.truncated_at is not None:
            note = {"kept_bytes": self.truncated_at, "dropped_bytes": self.dropped_bytes}
            data["metadata"] = {**data["metadata"], TRUNCATED_NOTE: note}
        return type(self.message).model_validate(data)

    def _quick_snapshot(self) -> Message | None:
        """The snapshot as a copy, or ``None`` when a lone surrogate may need repair.

        The copy holds its own top-level containers and nested records (the fold changes
        the record's message afterwards); parts and metadata values are shared.
        """
        message = self.message
        update: dict[str, Any] = {
            "content": self.content.text() or message.content,
            "metadata": dict(message.metadata),
            "parts": list(message.parts),
        }
        if message.tool_calls:
            update["tool_calls"] = [
                _with_text(call, "arguments", self.tool_args.get(call.tool_call_id))
                for call in message.tool_calls
            ]
        if message.reasonings:
            update["reasonings"] = [
                _with_text(item, "content", self.reasoning_text.get(item.reasoning_id))
                for item in message.reasonings
            ]
        copy = message.model_copy(update=update)
        if not storable(copy):
            return None
        if self.truncated_at is not None:
            note = {"kept_bytes": self.truncated_at, "dropped_bytes": self.dropped_bytes}
            copy.metadata[TRUNCATED_NOTE] = note
        return copy


@dataclass(eq=False)
class FoldState:
    """Everything the fold knows about one run.

    Records are kept in creation order, which is the order a buffered run writes them in.
    ``inbound_ids`` are the ids of the run input's messages and ``history`` the chat's
    messages the run began with (its context and the input it stored): a snapshot echoing
    them is not stored again; ``keep_events`` keeps events that carry no message content
    whole in the run's metadata; ``usage`` holds token usage per record key (``""``: the run's own).
    On a resumed run, ``previous_messages`` are the run's stored messages by AG-UI id and
    ``previous_steps`` its earlier attempts' steps by key (events re-sent for them are not
    stored again, see ``FoldBase.open_record``). ``foster_hosts`` maps the key of a record
    that tool calls name as their parent but that is no assistant message (a tool result)
    to the assistant record opened to hold them. ``run_started`` says a ``RUN_STARTED``
    was folded (a stream that then ends without a terminal event was cut).
    """

    chat: Chat
    run_id: str
    stack_id: str
    writer: RunWriter
    agent_id: str | None = None
    records: dict[str, Record] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    tool_hosts: dict[str, tuple[str, UUID]] = field(default_factory=dict)
    foster_hosts: dict[str, str] = field(default_factory=dict)
    reasoning_hosts: dict[str, tuple[str, UUID]] = field(default_factory=dict)
    open_reasoning_host: str | None = None
    #: a ``REASONING_START``/``THINKING_START`` not yet followed by content: ``(id, title)``
    pending_reasoning: tuple[str | None, str | None] | None = None
    current_reasoning: tuple[str, UUID] | None = None
    text_chunk: str | None = None
    tool_chunk: str | None = None
    last_key: str | None = None
    active_steps: list[str] = field(default_factory=list)
    agui_steps: dict[str, UUID] = field(default_factory=dict)
    #: how often each step name started in the run, and the key of its latest start
    step_starts: dict[str, int] = field(default_factory=dict)
    step_keys: dict[str, str] = field(default_factory=dict)
    steps: dict[UUID, Step] = field(default_factory=dict)
    dirty_steps: dict[UUID, None] = field(default_factory=dict)
    agui_state: Any = None
    has_agui_state: bool = False
    outcome: RunStatus | None = None
    run_started: bool = False
    error: str | None = None
    run_metadata: dict[str, Any] = field(default_factory=dict)
    event_timestamp: int | None = None
    agui_uses: dict[str, int] = field(default_factory=dict)
    inbound_ids: set[str] = field(default_factory=set)
    history: list[Message] = field(default_factory=list)
    keep_events: bool = False
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    previous_messages: dict[str, Message] = field(default_factory=dict)
    previous_steps: dict[str, Step] = field(default_factory=dict)
    #: the run record as the store last returned it (``begin_run``, heartbeats)
    run_record: Run | None = None
    _keys: itertools.count[int] = field(default_factory=itertools.count)

    def new_key(self, agui_id: str | None) -> str:
        """Return the record key for a message: its AG-UI id, or a fresh internal key."""
        if agui_id and agui_id not in self.records:
            return agui_id
        return f"\x00{next(self._keys)}"

    def run_agui_id(self, agui_id: str | None) -> str | None:
        """Return the ``agui_id`` a new record of the run stores for an AG-UI id.

        The first record of the run with an id stores the id itself. A record started for
        an id an earlier record of the run already used (a message id reused after its
        message ended, a tool result id repeated by a later model turn) stores
        ``"<id>#<n>"``, ``n`` counting the id's uses in the run (2, 3, ...): unique in the
        run, so the run's batch is not refused, and the same every time the same events are
        folded, so a replay dedups on it. The caller keeps the id itself in
        ``metadata["agui_id"]``.

        Args:
            agui_id: The AG-UI id of the event, or ``None``.

        Returns:
            The id to store, or ``None`` for ``None`` (or empty).
        """
        if not agui_id:
            return None
        uses = self.agui_uses.get(agui_id, 0) + 1
        self.agui_uses[agui_id] = uses
        return agui_id if uses == 1 else f"{agui_id}#{uses}"

    def add_record(self, record: Record, agui_id: str | None = None) -> None:
        """Keep a new record; ``agui_id`` now names it (a reused id names the newest).

        Args:
            record: The new record.
            agui_id: The AG-UI id events use for it (default: its ``message.agui_id``).
        """
        self.records[record.key] = record
        name = agui_id or record.message.agui_id
        if name:
            self.aliases[name] = record.key

    def record_for(self, agui_id: str | None) -> Record | None:
        """Return the newest record of the run with this AG-UI id, or ``None``."""
        key = self.aliases.get(agui_id) if agui_id else None
        return self.records.get(key) if key is not None else None

    @property
    def active_step(self) -> str | None:
        """The innermost AG-UI step in progress (``STEP_STARTED`` without its finish)."""
        return self.active_steps[-1] if self.active_steps else None

    def unfinished_records(self) -> list[Record]:
        """Records still open or holding an active nested record, in creation order."""
        return [r for r in self.records.values() if r.open or _has_active_item(r.message)]

    def finish_record(self, record: Record, status: MessageStatus) -> None:
        """End a record and every still-active nested record with ``status``."""
        record.open = False
        record.dirty = True
        message = record.message
        if message.status is MessageStatus.ACTIVE:
            message.status = status
        message.in_progress = False
        items: list[ToolCall | Reasoning] = [*message.tool_calls, *message.reasonings]
        for item in items:
            if item.status is MessageStatus.ACTIVE:
                item.status = status


N = TypeVar("N", ToolCall, Reasoning)


def _with_text(item: N, name: str, buffer: TextBuffer | None) -> N:
    """A copy of a nested record, its streamed field set from ``buffer`` when it has one."""
    return item.model_copy(update={name: buffer.text()} if buffer is not None else None)


def _has_active_item(message: Message) -> bool:
    items: list[ToolCall | Reasoning] = [*message.tool_calls, *message.reasonings]
    return any(item.status is MessageStatus.ACTIVE for item in items)
