"""The domain models: Chat, Message, ToolCall, Reasoning and message parts.

All models are pydantic v2 and meant to be subclassed: fields a subclass declares, and
undeclared extra fields, are stored with the record and read back equal on every driver.
Store-assigned fields (``seq``, ``chat_id`` of a message, timestamps, ``revision``) are
``None``/``0`` on a model you build and filled in on the copy the store returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeAlias, Union
from uuid import UUID, uuid4

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from ._dedup import chat_deduplication_key

__all__ = [
    "ActionPart",
    "Boundary",
    "Chat",
    "ChatStatus",
    "CustomPart",
    "ErrorPart",
    "FilePart",
    "ImagePart",
    "Message",
    "MessageInput",
    "MessageKind",
    "MessageStatus",
    "Part",
    "Reasoning",
    "Role",
    "Share",
    "ToolCall",
    "UTCDateTime",
]


def _to_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:  # pydantic wraps ValueError, not OverflowError
        raise ValueError(f"{value.isoformat()} is out of range in UTC (years 1 to 9999)") from exc


UTCDateTime = Annotated[AwareDatetime, AfterValidator(_to_utc)]
"""A timezone-aware datetime, normalized to UTC; naive datetimes are rejected."""


class Role(StrEnum):
    """Who a message is from, mirroring the AG-UI message roles."""

    DEVELOPER = "developer"
    SYSTEM = "system"
    ASSISTANT = "assistant"
    USER = "user"
    TOOL = "tool"
    REASONING = "reasoning"


class MessageStatus(StrEnum):
    """Lifecycle of a message, tool call or reasoning (a run's outcome ends its open records)."""

    ACTIVE = "active"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    ERRORED = "errored"


class MessageKind(StrEnum):
    """A plain message, or a boundary marker drawn by ``start_over``/``compact``."""

    MESSAGE = "message"
    BOUNDARY = "boundary"


class ChatStatus(StrEnum):
    """Where a chat's messages live: the hot store, or an archive bundle."""

    ACTIVE = "active"
    ARCHIVED = "archived"


class Share(StrEnum):
    """Who may see a chat besides its owner."""

    PRIVATE = "private"
    TEAM = "team"


class _Record(BaseModel):
    """Common configuration: extra fields are kept, assignments are validated."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, use_enum_values=False)


class ImagePart(_Record):
    """An image attachment, by URL or inline base64 ``data``."""

    type: Literal["image"] = "image"
    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    alt: str | None = None


class FilePart(_Record):
    """A file attachment; ``size`` is in bytes."""

    type: Literal["file"] = "file"
    url: str | None = None
    filename: str | None = None
    mime_type: str | None = None
    size: int | None = Field(default=None, ge=0)


class ActionPart(_Record):
    """An interactive action (a button, a form) with an arbitrary JSON payload."""

    type: Literal["action"] = "action"
    name: str
    payload: Any = None


class ErrorPart(_Record):
    """An error shown in the conversation."""

    type: Literal["error"] = "error"
    message: str
    code: str | None = None


class CustomPart(_Record):
    """Anything else, named by the application."""

    type: Literal["custom"] = "custom"
    name: str
    value: Any = None


Part = Annotated[
    ImagePart | FilePart | ActionPart | ErrorPart | CustomPart, Field(discriminator="type")
]
"""A typed attachment of a message, discriminated by ``type``."""


class ToolCall(_Record):
    """A tool call nested in an assistant message.

    ``arguments`` is the exact string the model produced (never parsed or re-serialized);
    ``content`` is the tool's result once known. ``message_id`` is the parent message, set by
    the store.
    """

    tool_call_id: UUID = Field(default_factory=uuid4)
    agui_id: str | None = None
    name: str = ""
    arguments: str = ""
    content: str | None = None
    status: MessageStatus = MessageStatus.COMPLETE
    message_id: UUID | None = None


class Reasoning(_Record):
    """A reasoning step nested in a message (AG-UI ``REASONING_*`` / ``THINKING_*``)."""

    reasoning_id: UUID = Field(default_factory=uuid4)
    agui_id: str | None = None
    name: str | None = None
    content: str = ""
    encrypted_value: str | None = None
    status: MessageStatus = MessageStatus.COMPLETE
    message_id: UUID | None = None


class Boundary(_Record):
    """What a boundary marker means: a "start over" line, or a compaction with a summary."""

    reason: Literal["start_over", "compaction"]
    upto_seq: int | None = Field(
        default=None, description="Last seq the boundary covers (compaction), else None."
    )


class Message(_Record):
    """One message of a chat; ``seq`` (store-assigned) is its only order.

    A boundary (``kind == "boundary"``) carries ``boundary``; a compaction boundary's
    ``content`` is the summary.
    """

    message_id: UUID = Field(default_factory=uuid4)
    chat_id: UUID | None = None
    agui_id: str | None = None
    role: Role
    content: str = ""
    parts: list[Part] = Field(default_factory=list)
    status: MessageStatus = MessageStatus.COMPLETE
    in_progress: bool = False
    tool_calls: list[ToolCall] = Field(default_factory=list)
    reasonings: list[Reasoning] = Field(default_factory=list)
    tool_call_ref: str | None = None
    run_id: str | None = None
    request_id: str | None = None
    block_id: str | None = None
    step: str | None = None
    tokens: int | None = Field(default=None, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    kind: MessageKind = MessageKind.MESSAGE
    boundary: Boundary | None = None
    v: int = 1
    seq: int | None = None
    revision: int = 0
    created_at: UTCDateTime | None = None
    updated_at: UTCDateTime | None = None
    deleted_at: UTCDateTime | None = None

    @model_validator(mode="after")
    def _boundary_matches_kind(self) -> Message:
        if (self.kind is MessageKind.BOUNDARY) != (self.boundary is not None):
            msg = "a boundary message needs kind='boundary' and a boundary, and only it"
            raise ValueError(msg)
        return self


class Chat(_Record):
    """One conversation thread: one live chat per ``(tenant_id, user_id, thread_id)``.

    ``seq`` is the store-assigned creation order that ``list_chats`` pages by (newest first).
    """

    chat_id: UUID = Field(default_factory=uuid4)
    user_id: str = Field(min_length=1)
    thread_id: str = Field(min_length=1)
    agent_id: str | None = None
    channel: str | None = None
    tenant_id: str | None = None
    team_id: str | None = None
    name: str | None = None
    status: ChatStatus = ChatStatus.ACTIVE
    share: Share = Share.PRIVATE
    metadata: dict[str, Any] = Field(default_factory=dict)
    archive_ref: str | None = None
    seq: int | None = None
    revision: int = 0
    created_at: UTCDateTime | None = None
    updated_at: UTCDateTime | None = None
    last_message_at: UTCDateTime | None = None
    deleted_at: UTCDateTime | None = None

    @property
    def dedup_key(self) -> str:
        """The 64-hex dedup key of ``(tenant_id, user_id, thread_id)``.

        See ``chat_deduplication_key``: a chat without a tenant keeps the tenant-less key.
        """
        return chat_deduplication_key(self.user_id, self.thread_id, self.tenant_id)


MessageInput: TypeAlias = Union[Message, Mapping[str, Any]]  # noqa: UP007 - __doc__ settable
MessageInput.__doc__ = """What ``Store.append_message`` and ``append_messages`` take as a message.

Either a :class:`Message` (or a subclass instance, whose extra fields are kept), or a
mapping of ``Message`` fields validated as the store's ``message_model`` (for example
``{"role": "user", "content": "hi"}``). Store-assigned fields (``chat_id``, ``seq``,
``revision``, ``updated_at``, ``deleted_at``) are ignored; ``created_at`` may be given
(timezone-aware, informational). A mapping that does not validate raises
``InvalidArgument``.
"""
