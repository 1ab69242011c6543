"""Agents SDK input items <-> threadkeep messages, exactly (dict equality both ways).

One item is one threadkeep message. What maps is stored typed, so the plain threadkeep API
reads it: message text in ``content`` and images/files as ``parts``; a ``function_call``
(and the hosted/computer/shell tool calls) as a ``ToolCall`` whose ``agui_id`` is the
``call_id``; a ``*_output`` item as a ``tool`` message whose ``tool_call_ref`` is that
``call_id`` (so the call links to its result); a ``reasoning`` item as a ``Reasoning``
(summary text in ``content``, ``encrypted_content`` in ``encrypted_value``). Everything
else of the item (ids, statuses, annotations, unknown fields, whole unknown item kinds)
is kept under ``metadata["openai_agents"]``. Every encoded message is decoded again before
it is stored; if that would not give back an equal item (a shape this module does not
know), the whole item is kept in metadata instead, so the round trip is exact for any item.
An item whose untyped part is large (a screenshot's data URL in a ``computer_call_output``,
an inline image over the store's 1 MiB beside the payload) is kept whole as JSON text in
``content`` (the payload, bounded by ``max_message_bytes``); an output keeps its
``tool_call_ref``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from threadkeep import (
    FilePart,
    ImagePart,
    Message,
    MessageStatus,
    Reasoning,
    Role,
    ToolCall,
)

from .._sizes import fits_beside_payload

__all__ = ["METADATA_KEY", "item_to_message", "message_to_items"]

METADATA_KEY = "openai_agents"
"""The ``Message.metadata`` key holding what of an item is not stored in typed fields."""

_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM}
_ROLES["developer"] = Role.DEVELOPER
_STATUSES = {
    "completed": MessageStatus.COMPLETE,
    "in_progress": MessageStatus.ACTIVE,
    "incomplete": MessageStatus.INTERRUPTED,
    "failed": MessageStatus.ERRORED,
}
_TEXT_KEYS = {
    "input_text": "text",
    "output_text": "text",
    "summary_text": "text",
    "reasoning_text": "text",
    "refusal": "refusal",
}
# Tool calls other than function_call: type -> (key of the name or None, key of the payload).
_CALLS = {
    "function_call": ("name", "arguments"),
    "custom_tool_call": ("name", "input"),
    "mcp_call": ("name", "arguments"),
    "computer_call": (None, "action"),
    "local_shell_call": (None, "action"),
    "shell_call": (None, "action"),
    "apply_patch_call": (None, "operation"),
}


class _Untyped(Exception):
    """The item has a shape the typed mapping does not cover."""


Encoded = tuple[dict[str, Any], set[str], dict[str, Any]]
"""Message fields, the item keys they hold, and extra metadata needed to decode them."""


def _status(item: Mapping[str, Any]) -> MessageStatus:
    return _STATUSES.get(str(item.get("status")), MessageStatus.COMPLETE)


def _text_of(value: Any) -> str:
    if not isinstance(value, str):
        raise _Untyped
    return value


# -- content parts ------------------------------------------------------------------------


def _encode_parts(parts: Any) -> tuple[str, list[Any], list[dict[str, Any]]]:
    """Return (joined text, typed parts, layout) for a list of content parts."""
    if not isinstance(parts, list):
        raise _Untyped
    texts: list[str] = []
    typed: list[Any] = []
    layout: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, Mapping):
            raise _Untyped
        kind = part.get("type")
        text_key = _TEXT_KEYS.get(str(kind))
        if text_key is not None and isinstance(part.get(text_key), str):
            texts.append(part[text_key])
            rest = {k: v for k, v in part.items() if k != text_key}
            layout.append({"text": text_key, "length": len(part[text_key]), "rest": rest})
        elif kind in ("input_image", "input_file"):
            typed.append(_typed_attachment(part))
            layout.append({"part": len(typed) - 1, "keys": list(part)})
        else:
            layout.append({"raw": dict(part)})
    return "".join(texts), typed, layout


def _typed_attachment(part: Mapping[str, Any]) -> ImagePart | FilePart:
    url_key = "image_url" if part["type"] == "input_image" else "file_url"
    model = ImagePart if part["type"] == "input_image" else FilePart
    extras = {k: v for k, v in part.items() if k not in ("type", url_key, "filename")}
    if set(extras) & set(model.model_fields):
        raise _Untyped
    fields: dict[str, Any] = {"url": part.get(url_key), **extras}
    if model is FilePart:
        fields["filename"] = part.get("filename")
    return model(**fields)


def _decode_parts(text: str, typed: list[Any], layout: list[dict[str, Any]]) -> list[Any]:
    parts: list[Any] = []
    offset = 0
    for entry in layout:
        if "text" in entry:
            end = offset + entry["length"]
            parts.append({**entry["rest"], entry["text"]: text[offset:end]})
            offset = end
        elif "part" in entry:
            parts.append(_untyped_attachment(typed[entry["part"]], entry["keys"]))
        else:
            parts.append(entry["raw"])
    return parts


def _untyped_attachment(part: ImagePart | FilePart, keys: list[str]) -> dict[str, Any]:
    data = part.model_dump(mode="json")
    kind = "input_image" if isinstance(part, ImagePart) else "input_file"
    data.update(type=kind, image_url=data.get("url"), file_url=data.get("url"))
    return {key: data.get(key) for key in keys}


# -- one encoder per item kind ---------------------------------------------------------------


def _encode_message(item: Mapping[str, Any]) -> Encoded:
    role = _ROLES.get(str(item.get("role")))
    if role is None:
        raise _Untyped
    fields: dict[str, Any] = {"role": role, "status": _status(item)}
    content = item.get("content")
    if isinstance(content, str):
        return {**fields, "content": content}, {"role", "content"}, {}
    text, typed, layout = _encode_parts(content)
    return {**fields, "content": text, "parts": typed}, {"role", "content"}, {"layout": layout}


def _encode_call(item: Mapping[str, Any]) -> Encoded:
    name_key, payload_key = _CALLS[item["type"]]
    call_id = (
        item.get("call_id", item.get("id")) if item["type"] == "mcp_call" else item.get("call_id")
    )
    payload = item.get(payload_key)
    arguments = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    name = _text_of(item.get(name_key)) if name_key else item["type"]
    call = ToolCall(agui_id=_text_of(call_id), name=name, arguments=arguments, status=_status(item))
    consumed = {payload_key} | ({name_key} if name_key else set())
    if item["type"] != "mcp_call":
        consumed.add("call_id")
    meta = {"payload_json": not isinstance(payload, str)}
    return {"role": Role.ASSISTANT, "tool_calls": [call], "status": call.status}, consumed, meta


def _encode_output(item: Mapping[str, Any]) -> Encoded:
    output = item.get("output")
    fields: dict[str, Any] = {"role": Role.TOOL, "tool_call_ref": _text_of(item.get("call_id"))}
    consumed = {"call_id"}
    if isinstance(output, str):
        fields["content"] = output
        consumed.add("output")
    return fields, consumed, {}


def _encode_reasoning(item: Mapping[str, Any]) -> Encoded:
    text, typed, layout = _encode_parts(item.get("summary"))
    if typed:
        raise _Untyped
    encrypted = item.get("encrypted_content")
    reasoning = Reasoning(
        content=text,
        encrypted_value=encrypted if isinstance(encrypted, str) else None,
        status=_status(item),
    )
    consumed = {"summary"} | ({"encrypted_content"} if isinstance(encrypted, str) else set())
    return {"role": Role.REASONING, "reasonings": [reasoning]}, consumed, {"layout": layout}


def _encoder(item: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], Encoded] | None:
    kind = item.get("type")
    if kind in (None, "message") and "role" in item:
        return _encode_message
    if kind in _CALLS:
        return _encode_call
    if isinstance(kind, str) and kind.endswith("_call_output") and "call_id" in item:
        return _encode_output
    if kind == "reasoning":
        return _encode_reasoning
    return None


def item_to_message(item: Mapping[str, Any]) -> Message:
    """Return the threadkeep message that stores ``item`` (one Agents SDK input item).

    Args:
        item: An input item (a ``TResponseInputItem`` dict) of any kind; it is not changed.

    Returns:
        An unsaved ``Message``: typed where the item maps, the rest under
        ``metadata["openai_agents"]``; an item of a shape this module does not know is kept
        whole there. Whether it can be stored (JSON values, size) is checked by the store
        on append (``InvalidContent``, ``PayloadTooLarge``).
    """
    encoder = _encoder(item)
    if encoder is not None:
        try:
            fields, consumed, meta = encoder(item)
            rest = {k: v for k, v in item.items() if k not in consumed}
            message = Message(**fields, metadata={METADATA_KEY: {**meta, "rest": rest}})
            if message_to_items(message) == [dict(item)] and fits_beside_payload(message):
                return message
        except (_Untyped, ValidationError, TypeError, KeyError):
            pass
    return _whole(item)


def _whole(item: Mapping[str, Any]) -> Message:
    """The item kept whole: in metadata, or as JSON text in ``content`` when it is large."""
    call_ref = item.get("call_id") if "output" in item else None
    role = Role.TOOL if isinstance(call_ref, str) else Role.ASSISTANT
    if role is Role.ASSISTANT and _ROLES.get(str(item.get("role"))) is not None:
        role = _ROLES[str(item["role"])]
    message = Message(role=role, metadata={METADATA_KEY: {"item": dict(item)}})
    if fits_beside_payload(message):
        return message
    try:  # bounded by max_message_bytes (16 MiB by default), not by the 1 MiB envelope
        text = json.dumps(item, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):  # no JSON form: the store names what is wrong on append
        return message
    return Message(
        role=role, content=text, tool_call_ref=call_ref, metadata={METADATA_KEY: {"json": True}}
    )


# -- decoding --------------------------------------------------------------------------------


def _decode(message: Message, meta: Mapping[str, Any]) -> dict[str, Any]:
    """Rebuild an item from a message this module encoded (``type`` is kept in ``rest``)."""
    rest = dict(meta.get("rest", {}))
    kind = rest.get("type")
    if kind in _CALLS and message.tool_calls:
        call = message.tool_calls[0]
        name_key, payload_key = _CALLS[kind]
        payload = json.loads(call.arguments) if meta.get("payload_json") else call.arguments
        rest[payload_key] = payload
        if name_key:
            rest[name_key] = call.name
        if kind != "mcp_call":
            rest["call_id"] = call.agui_id
        return rest
    if message.role is Role.TOOL:
        rest["call_id"] = message.tool_call_ref
        rest.setdefault("output", message.content)
        return rest
    if kind == "reasoning" and message.reasonings:
        reasoning = message.reasonings[0]
        rest["summary"] = _decode_parts(reasoning.content, [], meta.get("layout", []))
        if reasoning.encrypted_value is not None:
            rest["encrypted_content"] = reasoning.encrypted_value
        return rest
    content: Any = message.content
    if "layout" in meta:
        content = _decode_parts(message.content, list(message.parts), meta["layout"])
    return {**rest, "role": message.role.value, "content": content}


def _foreign_items(message: Message) -> list[dict[str, Any]]:
    """Items for a message another threadkeep client wrote (no ``openai_agents`` metadata)."""
    if message.role is Role.TOOL:
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_ref or "",
                "output": message.content,
            }
        ]
    items: list[dict[str, Any]] = []
    if message.role.value in _ROLES and (message.content or not message.tool_calls):
        items.append({"role": message.role.value, "content": message.content})
    items += [
        {
            "type": "function_call",
            "call_id": call.agui_id or str(call.tool_call_id),
            "name": call.name,
            "arguments": call.arguments,
        }
        for call in message.tool_calls
    ]
    return items


def message_to_items(message: Message) -> list[dict[str, Any]]:
    """Return the input items a stored message stands for, oldest first.

    A message written by this module gives back exactly the item it was built from; a
    plain threadkeep message written by another client gives its text as a message item
    and its tool calls as ``function_call`` items (a ``tool`` message: a
    ``function_call_output``); reasoning messages and boundaries of other clients give
    nothing.
    """
    meta = message.metadata.get(METADATA_KEY)
    if not isinstance(meta, Mapping):
        return [] if message.role is Role.REASONING else _foreign_items(message)
    if "item" in meta:
        return [dict(meta["item"])]
    if meta.get("json") is True:
        return [json.loads(message.content)]
    return [_decode(message, meta)]
