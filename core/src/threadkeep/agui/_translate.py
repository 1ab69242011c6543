"""Stored messages <-> AG-UI messages (the history the inner agent receives, and inbound input).

Mapping (AG-UI message roles to stored messages, one stored message per AG-UI message):

- ``user``/``system``/``developer`` messages map to the same role; a user message's content
  parts (image, audio, video, document) become typed parts, its text parts the ``content``.
- an ``assistant`` message keeps its tool calls nested (``agui_id`` = the call id,
  ``arguments`` the exact string); an AG-UI *activity* message is an assistant message with
  one ``CustomPart`` named ``agui_activity`` and ``metadata["agui_role"] == "activity"``.
- a ``tool`` message keeps ``tool_call_ref`` (the call it answers); its ``error`` is an
  ``ErrorPart``.
- a ``reasoning`` message holds its text in nested ``Reasoning`` records.

The AG-UI id of a stored message is its ``agui_id`` (or ``metadata["agui_id"]`` when the id
had to be moved aside, see ``StorageAgent``), else the string of its ``message_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ag_ui.core import (
    ActivityMessage,
    AssistantMessage,
    DeveloperMessage,
    FunctionCall,
    ReasoningMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import ToolCall as AguiToolCall

from .._models import (
    CustomPart,
    ErrorPart,
    FilePart,
    ImagePart,
    Message,
    MessageKind,
    Part,
    Reasoning,
    Role,
    ToolCall,
)

__all__ = [
    "ACTIVITY_PART",
    "AguiMessage",
    "agui_id_of",
    "message_from_agui",
    "parts_from_agui",
    "translate_messages",
]

AguiMessage = (
    DeveloperMessage
    | SystemMessage
    | AssistantMessage
    | UserMessage
    | ToolMessage
    | ActivityMessage
    | ReasoningMessage
)
"""Any AG-UI message model of the installed ``ag-ui-protocol``."""

ACTIVITY_PART = "agui_activity"
"""Name of the ``CustomPart`` that holds an AG-UI activity message's type and content."""

_MEDIA = {"image", "audio", "video", "document"}


def agui_id_of(message: Message) -> str:
    """Return the AG-UI id of a stored message (see the module docstring)."""
    moved = message.metadata.get("agui_id")
    return message.agui_id or (moved if isinstance(moved, str) else str(message.message_id))


def _tool_call_id(call: ToolCall) -> str:
    return call.agui_id or str(call.tool_call_id)


def translate_messages(messages: Sequence[Message]) -> list[AguiMessage]:
    """Translate stored messages (oldest first) into AG-UI history messages.

    A compaction boundary (first in ``Store.context_messages`` after a compaction) becomes a
    system message carrying the summary; other boundaries are skipped.
    """
    translated: list[AguiMessage] = []
    for message in messages:
        if message.kind is MessageKind.BOUNDARY:
            if message.content:
                translated.append(SystemMessage(id=agui_id_of(message), content=message.content))
            continue
        translated.append(_to_agui(message))
    return translated


def _to_agui(message: Message) -> AguiMessage:
    agui_id = agui_id_of(message)
    if message.role is Role.USER:
        return UserMessage(id=agui_id, content=_content(message))
    if message.role is Role.SYSTEM:
        return SystemMessage(id=agui_id, content=message.content)
    if message.role is Role.DEVELOPER:
        return DeveloperMessage(id=agui_id, content=message.content)
    if message.role is Role.TOOL:
        return _tool_message(agui_id, message)
    if message.role is Role.REASONING:
        encrypted = next((r.encrypted_value for r in message.reasonings if r.encrypted_value), None)
        text = "".join(r.content for r in message.reasonings) or message.content
        return ReasoningMessage(id=agui_id, content=text, encrypted_value=encrypted)
    return _assistant_message(agui_id, message)


def _tool_message(agui_id: str, message: Message) -> ToolMessage:
    errors = [p.message for p in message.parts if isinstance(p, ErrorPart)]
    return ToolMessage(
        id=agui_id,
        content=_content(message),
        tool_call_id=message.tool_call_ref or "",
        error=errors[0] if errors else None,
    )


def _assistant_message(agui_id: str, message: Message) -> AssistantMessage | ActivityMessage:
    activity = _activity(message)
    if activity is not None:
        return ActivityMessage(
            id=agui_id,
            activity_type=str(activity.get("activity_type", "")),
            content=dict(activity.get("content") or {}),
        )
    calls = [
        AguiToolCall(
            id=_tool_call_id(call),
            function=FunctionCall(name=call.name, arguments=call.arguments),
            encrypted_value=getattr(call, "encrypted_value", None),
        )
        for call in message.tool_calls
    ]
    return AssistantMessage(
        id=agui_id,
        content=message.content or None,
        tool_calls=calls or None,
        name=message.metadata.get("agui_name"),
        encrypted_value=message.metadata.get("agui_encrypted_value"),
    )


def _activity(message: Message) -> dict[str, Any] | None:
    if message.metadata.get("agui_role") != "activity":
        return None
    for part in message.parts:
        if isinstance(part, CustomPart) and part.name == ACTIVITY_PART:
            return dict(part.value or {})
    return {}


def _content(message: Message) -> Any:
    """Return a plain string, or text plus media as AG-UI content parts."""
    media = [p for p in message.parts if not isinstance(p, ErrorPart)]
    if not media:
        return message.content
    content: list[Any] = [{"type": "text", "text": message.content}] if message.content else []
    content.extend(_part_to_agui(p) for p in media)
    return content


def _part_to_agui(part: Part) -> dict[str, Any]:
    if isinstance(part, CustomPart):
        original = part.value if isinstance(part.value, dict) else {}
        return original or {"type": part.name.removeprefix("agui_")}
    source = getattr(part, "source", None)
    kind = getattr(part, "kind", None) or ("image" if isinstance(part, ImagePart) else "document")
    if not isinstance(source, dict):
        url = getattr(part, "url", None)
        data = getattr(part, "data", None)
        mime = getattr(part, "mime_type", None)
        if data is not None:
            source = {"type": "data", "value": data, "mimeType": mime or ""}
        else:
            source = {"type": "url", "value": url or "", **({"mimeType": mime} if mime else {})}
    return {"type": kind, "source": source}


def parts_from_agui(content: Any) -> tuple[str, list[Part]]:
    """Split AG-UI message content into ``(text, parts)``.

    Args:
        content: A string, or a list of AG-UI content parts (models or mappings). Text parts
            are concatenated into the text; media parts become ``ImagePart`` (images) or
            ``FilePart`` (audio, video, documents) keeping the original ``source`` and
            ``kind``, so translating back gives the same parts.

    Returns:
        The text and the typed parts.
    """
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    parts: list[Part] = []
    for item in content:
        data = item.model_dump(by_alias=True) if hasattr(item, "model_dump") else dict(item)
        kind = data.get("type")
        if kind == "text":
            texts.append(str(data.get("text", "")))
        elif kind in _MEDIA:
            parts.append(_media_part(kind, data.get("source") or {}))
        else:
            parts.append(CustomPart(name=f"agui_{kind}", value=data))
    return "".join(texts), parts


def _media_part(kind: str, source: dict[str, Any]) -> Part:
    value = source.get("value")
    mime = source.get("mimeType") or source.get("mime_type")
    located = {"data": value} if source.get("type") == "data" else {"url": value}
    if kind == "image":
        return ImagePart(mime_type=mime, source=source, kind=kind, **located)
    return FilePart(mime_type=mime, source=source, kind=kind, **located)


def message_from_agui(message: AguiMessage, *, run_id: str | None) -> Message:
    """Convert an inbound AG-UI message into a ``Message`` to store (see the module docstring).

    Args:
        message: The AG-UI message; its ``id`` becomes ``agui_id``.
        run_id: The run that stored it.
    """
    base: dict[str, Any] = {"agui_id": message.id, "run_id": run_id}
    if isinstance(message, UserMessage):
        text, parts = parts_from_agui(message.content)
        return Message(role=Role.USER, content=text, parts=parts, **base)
    if isinstance(message, SystemMessage | DeveloperMessage):
        return Message(role=Role(message.role), content=message.content, **base)
    if isinstance(message, ToolMessage):
        text, parts = parts_from_agui(message.content)
        if message.error:
            parts.append(ErrorPart(message=message.error))
        return Message(
            role=Role.TOOL, content=text, parts=parts, tool_call_ref=message.tool_call_id, **base
        )
    if isinstance(message, ReasoningMessage):
        reasoning = Reasoning(
            agui_id=message.id, content=message.content, encrypted_value=message.encrypted_value
        )
        return Message(role=Role.REASONING, reasonings=[reasoning], **base)
    if isinstance(message, ActivityMessage):
        value = {"activity_type": message.activity_type, "content": message.content}
        return Message(
            role=Role.ASSISTANT,
            parts=[CustomPart(name=ACTIVITY_PART, value=value)],
            metadata={"agui_role": "activity"},
            **base,
        )
    calls = [
        ToolCall(agui_id=c.id, name=c.function.name, arguments=c.function.arguments)
        for c in message.tool_calls or []
    ]
    metadata: dict[str, Any] = {"agui_name": message.name} if message.name else {}
    if message.encrypted_value:
        metadata["agui_encrypted_value"] = message.encrypted_value
    return Message(
        role=Role.ASSISTANT,
        content=message.content or "",
        tool_calls=calls,
        metadata=metadata,
        **base,
    )
