"""The gateway's JSON shapes: camelCase on the wire, as the storage design writes them.

Store models are snake_case Python; these are their wire forms (``MessageItem.of(message)``
and so on). User data (``metadata``, a part's ``payload`` or ``value``) is passed through
unchanged: only the field names of threadkeep's own records are camelCased.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .._models import Chat, Message, Reasoning, ToolCall
from .._paging import Page
from .._runs import Run

__all__ = [
    "BoundaryItem",
    "CancelOut",
    "ErrorBody",
    "ErrorDetail",
    "MessageItem",
    "PageOut",
    "ReasoningItem",
    "RenameBody",
    "RunItem",
    "StartOverOut",
    "ThreadItem",
    "ThreadOut",
    "ToolCallItem",
    "page_out",
]

T = TypeVar("T")
S = TypeVar("S")


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class ToolCallItem(_Wire):
    """A tool call nested in an assistant message, with its result (``content``) if any."""

    tool_call_id: str
    agui_id: str | None
    name: str
    arguments: str
    content: str | None
    status: str

    @classmethod
    def of(cls, call: ToolCall) -> ToolCallItem:
        """Return the wire form of ``call``."""
        return cls(
            tool_call_id=str(call.tool_call_id),
            agui_id=call.agui_id,
            name=call.name,
            arguments=call.arguments,
            content=call.content,
            status=call.status.value,
        )


class ReasoningItem(_Wire):
    """A reasoning block nested in a message (``encrypted`` says an opaque value is kept)."""

    reasoning_id: str
    agui_id: str | None
    name: str | None
    content: str
    encrypted: bool
    status: str

    @classmethod
    def of(cls, reasoning: Reasoning) -> ReasoningItem:
        """Return the wire form of ``reasoning`` (the encrypted value itself is not sent)."""
        return cls(
            reasoning_id=str(reasoning.reasoning_id),
            agui_id=reasoning.agui_id,
            name=reasoning.name,
            content=reasoning.content,
            encrypted=reasoning.encrypted_value is not None,
            status=reasoning.status.value,
        )


class BoundaryItem(_Wire):
    """A boundary line: ``start_over`` or ``compaction`` (up to ``uptoSeq``)."""

    reason: str
    upto_seq: int | None


class MessageItem(_Wire):
    """One message of a thread, as the UI renders it."""

    message_id: str
    thread_id: str
    seq: int | None
    agui_id: str | None
    role: str
    kind: str
    content: str
    parts: list[dict[str, Any]]
    status: str
    in_progress: bool
    tool_calls: list[ToolCallItem]
    reasonings: list[ReasoningItem]
    tool_call_ref: str | None
    run_id: str | None
    request_id: str | None
    block_id: str | None
    step: str | None
    tokens: int | None
    metadata: dict[str, Any]
    boundary: BoundaryItem | None
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def of(cls, message: Message) -> MessageItem:
        """Return the wire form of a stored ``message`` (``thread_id`` is its chat id)."""
        boundary = message.boundary
        return cls(
            message_id=str(message.message_id),
            thread_id=str(message.chat_id),
            seq=message.seq,
            agui_id=message.agui_id,
            role=message.role.value,
            kind=message.kind.value,
            content=message.content,
            parts=[_camel_keys(part.model_dump(mode="json")) for part in message.parts],
            status=message.status.value,
            in_progress=message.in_progress,
            tool_calls=[ToolCallItem.of(call) for call in message.tool_calls],
            reasonings=[ReasoningItem.of(r) for r in message.reasonings],
            tool_call_ref=message.tool_call_ref,
            run_id=message.run_id,
            request_id=message.request_id,
            block_id=message.block_id,
            step=message.step,
            tokens=message.tokens,
            metadata=message.metadata,
            boundary=None
            if boundary is None
            else BoundaryItem(reason=boundary.reason, upto_seq=boundary.upto_seq),
            created_at=message.created_at,
            updated_at=message.updated_at,
        )


class ThreadItem(_Wire):
    """One thread (a stored chat).

    ``threadId`` is the id the thread routes take; ``key`` is the owner's own thread key (the
    AG-UI ``threadId`` a run is sent with).
    """

    thread_id: str
    key: str
    agent_id: str | None
    channel: str | None
    user_id: str
    team_id: str | None
    share: str
    name: str | None
    status: str
    metadata: dict[str, Any]
    created_at: datetime | None
    updated_at: datetime | None
    last_message_at: datetime | None
    deleted_at: datetime | None

    @classmethod
    def of(cls, chat: Chat) -> ThreadItem:
        """Return the wire form of ``chat``."""
        return cls(
            thread_id=str(chat.chat_id),
            key=chat.thread_id,
            agent_id=chat.agent_id,
            channel=chat.channel,
            user_id=chat.user_id,
            team_id=chat.team_id,
            share=chat.share.value,
            name=chat.name,
            status=chat.status.value,
            metadata=chat.metadata,
            created_at=chat.created_at,
            updated_at=chat.updated_at,
            last_message_at=chat.last_message_at,
            deleted_at=chat.deleted_at,
        )


class RunItem(_Wire):
    """A run's outcome: ``active``, ``complete``, ``interrupted`` or ``errored``."""

    thread_id: str
    run_id: str
    status: str
    error: str | None
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def of(cls, run: Run) -> RunItem:
        """Return the wire form of ``run`` (its lease and owner stay server-side)."""
        return cls(
            thread_id=str(run.chat_id),
            run_id=run.run_id,
            status=run.status.value,
            error=run.error,
            created_at=run.created_at,
            updated_at=run.updated_at,
        )


class PageOut(_Wire, Generic[T]):
    """A page: ``{items, nextCursor, hasMore}``.

    Items run oldest to newest; ``nextCursor`` walks to older items and is ``null`` exactly
    when ``hasMore`` is false.
    """

    items: list[T]
    next_cursor: str | None
    has_more: bool


class ThreadOut(_Wire):
    """One thread: the answer of rename, delete and restore."""

    item: ThreadItem


class CancelOut(_Wire):
    """Whether a run was stopped (``false``: it was not executing on this server)."""

    cancelled: bool


class StartOverOut(_Wire):
    """The "start over" line in effect (new or already there), ``null`` for an empty thread."""

    item: MessageItem | None


class RenameBody(_Wire):
    """The body of a rename: the new name, or ``null`` to clear it."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(max_length=1000)


class ErrorDetail(_Wire):
    """What went wrong: a stable ``code`` (for programs) and a ``message`` (for people)."""

    code: str
    message: str


class ErrorBody(_Wire):
    """Every error answer: ``{"error": {"code": ..., "message": ...}}``."""

    error: ErrorDetail


def page_out(page: Page[S], convert: Callable[[S], T]) -> PageOut[T]:
    """Return a store ``page`` as the wire page, each item passed through ``convert``."""
    return PageOut[T](
        items=[convert(item) for item in page.items],
        next_cursor=page.next_cursor,
        has_more=page.has_more,
    )


def _camel_keys(record: dict[str, Any]) -> dict[str, Any]:
    return {to_camel(key): value for key, value in record.items()}
