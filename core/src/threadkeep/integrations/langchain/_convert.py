"""LangChain messages <-> threadkeep messages, exactly (``BaseMessage`` equality both ways).

What maps is stored typed: the role (human -> ``user``, ai -> ``assistant``, system ->
``system``, tool -> ``tool``), the text in ``content``, an ``AIMessage``'s ``tool_calls`` as
``ToolCall`` records (``id`` -> ``agui_id``, ``args`` as JSON ``arguments``) and its
``usage_metadata["total_tokens"]`` as ``tokens``, a ``ToolMessage``'s ``tool_call_id`` as
``tool_call_ref`` (linking the result to its call) and its ``status`` (``error`` ->
``errored``). The rest of the message's fields that differ from their defaults (``id``,
``name``, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``, content blocks,
``artifact``...) is kept under ``metadata["langchain"]``. Every encoded message is decoded
before it is stored; if that does not give back an equal message, the whole serialized
message is kept instead, so the round trip is exact for any message class LangChain can load.
A message whose untyped part is large (an inline image's data URL in content blocks, a big
``artifact``), over the store's 1 MiB beside the payload, is kept whole as JSON text in
``content`` (bounded by ``max_message_bytes``), its role, tool calls and ``tool_call_ref``
still typed.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from pydantic import ValidationError

from threadkeep import Message, MessageStatus, Role, ToolCall

from .._sizes import fits_beside_payload

__all__ = ["METADATA_KEY", "from_threadkeep", "to_threadkeep"]

METADATA_KEY = "langchain"
"""The ``Message.metadata`` key holding what of a LangChain message is not stored typed."""

_ROLES = {"human": Role.USER, "ai": Role.ASSISTANT, "system": Role.SYSTEM, "tool": Role.TOOL}
_TOOL_STATUS = {"success": MessageStatus.COMPLETE, "error": MessageStatus.ERRORED}


def _non_defaults(message: BaseMessage) -> dict[str, Any]:
    """The message's fields that differ from their defaults (``type`` excluded)."""
    data = message.model_dump()
    fields = type(message).model_fields
    kept: dict[str, Any] = {}
    for name, value in data.items():
        field = fields.get(name)
        if name == "type" or (
            field is not None
            and not field.is_required()
            and value == field.get_default(call_default_factory=True)
        ):
            continue
        kept[name] = value
    return kept


def _role(message: BaseMessage) -> Role:
    """The threadkeep role: by type (chunks as their message), a ``ChatMessage`` by role."""
    role = _ROLES.get(message.type.removesuffix("MessageChunk").lower())
    if role is None and isinstance(getattr(message, "role", None), str):
        role = {r.value: r for r in Role}.get(message.role)  # type: ignore[attr-defined]
    return role or Role.ASSISTANT


def _typed(message: BaseMessage, data: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """Return the threadkeep fields for ``message`` and the LangChain fields they hold."""
    fields: dict[str, Any] = {"role": _role(message)}
    consumed: set[str] = set()
    if isinstance(message.content, str):
        fields["content"] = message.content
        consumed.add("content")
    else:
        fields["content"] = message.text  # readable text; the blocks stay in metadata
    if isinstance(message, AIMessage):
        if message.tool_calls:
            fields["tool_calls"] = [
                ToolCall(agui_id=call["id"], name=call["name"], arguments=json.dumps(call["args"]))
                for call in message.tool_calls
            ]
            consumed.add("tool_calls")
        usage = message.usage_metadata
        if usage is not None:
            fields["tokens"] = usage.get("total_tokens")
    if isinstance(message, ToolMessage):
        fields["tool_call_ref"] = message.tool_call_id
        fields["status"] = _TOOL_STATUS.get(message.status, MessageStatus.COMPLETE)
        consumed |= {"tool_call_id", "status"}
    return fields, consumed


def to_threadkeep(message: BaseMessage) -> Message:
    """Return the threadkeep message that stores a LangChain message.

    Raises:
        InvalidArgument: If ``message`` is not a LangChain ``BaseMessage``.
    """
    from threadkeep import InvalidArgument

    if not isinstance(message, BaseMessage):
        raise InvalidArgument(f"expected a LangChain BaseMessage, not {type(message).__name__}")
    data = _non_defaults(message)
    try:
        fields, consumed = _typed(message, data)
        rest = {k: v for k, v in data.items() if k not in consumed}
        meta = {"type": message.type, "rest": rest}
        stored = Message(**fields, metadata={METADATA_KEY: meta})
        if (
            from_threadkeep(stored) == [message]
            and type(from_threadkeep(stored)[0]) is type(message)
            and fits_beside_payload(stored)
        ):
            return stored
    except (ValidationError, TypeError, KeyError, ValueError):
        fields = {"role": _role(message), "content": message.text}
    whole = Message(**fields, metadata={METADATA_KEY: {"message": message_to_dict(message)}})
    return whole if fits_beside_payload(whole) else _as_json(message, whole)


def _as_json(message: BaseMessage, whole: Message) -> Message:
    """The message as JSON text in ``content`` (the payload), for one too large for metadata.

    Its role, tool calls and ``tool_call_ref`` stay typed, so calls still link to results.
    """
    try:
        text = json.dumps(message_to_dict(message), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):  # no JSON form: the store names what is wrong on append
        return whole
    return whole.model_copy(update={"content": text, "metadata": {METADATA_KEY: {"json": True}}})


def _decode(message: Message, meta: dict[str, Any]) -> BaseMessage:
    data: dict[str, Any] = dict(meta.get("rest", {}))
    data.setdefault("content", message.content)
    if message.tool_calls and "tool_calls" not in data:
        data["tool_calls"] = [
            {"name": c.name, "args": json.loads(c.arguments), "id": c.agui_id, "type": "tool_call"}
            for c in message.tool_calls
        ]
    if meta["type"] == "tool":
        data.setdefault("tool_call_id", message.tool_call_ref)
        data.setdefault("status", "error" if message.status is MessageStatus.ERRORED else "success")
    return messages_from_dict([{"type": meta["type"], "data": data}])[0]


def _foreign(message: Message) -> list[BaseMessage]:
    """LangChain messages for a threadkeep message another client wrote."""
    if message.role is Role.USER:
        return [HumanMessage(content=message.content)]
    if message.role in (Role.SYSTEM, Role.DEVELOPER):
        return [SystemMessage(content=message.content)]
    if message.role is Role.TOOL:
        status = "error" if message.status is MessageStatus.ERRORED else "success"
        return [
            ToolMessage(
                content=message.content, tool_call_id=message.tool_call_ref or "", status=status
            )
        ]
    if message.role is not Role.ASSISTANT:
        return []
    calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for call in message.tool_calls:
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError:
            args = None
        if isinstance(args, dict):
            calls.append({"name": call.name, "args": args, "id": call.agui_id, "type": "tool_call"})
        else:
            invalid.append(
                {
                    "name": call.name,
                    "args": call.arguments,
                    "id": call.agui_id,
                    "error": None,
                    "type": "invalid_tool_call",
                }
            )
    return [AIMessage(content=message.content, tool_calls=calls, invalid_tool_calls=invalid)]


def from_threadkeep(message: Message) -> list[BaseMessage]:
    """Return the LangChain messages a stored message stands for (one, or none).

    A message written by :func:`to_threadkeep` gives back an equal message; a plain threadkeep
    message of another client gives a ``HumanMessage``, ``AIMessage`` (with its tool calls),
    ``SystemMessage`` or ``ToolMessage``; reasoning messages give nothing.
    """
    meta = message.metadata.get(METADATA_KEY)
    if not isinstance(meta, dict):
        return _foreign(message)
    if "message" in meta:
        return messages_from_dict([meta["message"]])
    if meta.get("json") is True:
        return messages_from_dict([json.loads(message.content)])
    return [_decode(message, meta)]
