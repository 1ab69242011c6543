"""Pydantic AI ``ModelMessage``s <-> threadkeep messages, exact through ModelMessagesTypeAdapter.

Work is done on the JSON form ``ModelMessagesTypeAdapter`` gives, so what reads back dumps to
the same JSON. A ``ModelResponse`` is one ``assistant`` message: its ``TextPart`` texts joined
in ``content``, each ``ToolCallPart`` a ``ToolCall`` (``tool_call_id`` -> ``agui_id``,
``tool_name`` -> ``name``, ``args`` as the model's text or as JSON), each ``ThinkingPart`` a
``Reasoning`` (``content``, ``signature`` -> ``encrypted_value``), ``usage.input_tokens +
output_tokens`` as ``tokens``. A ``ModelRequest`` is one message per part, so that each tool
result is its own ``tool`` message linked to its call: ``SystemPromptPart`` -> ``system``,
``UserPromptPart`` -> ``user``, ``ToolReturnPart`` / ``RetryPromptPart`` of a tool -> ``tool``
with ``tool_call_ref``; the request's own fields ride on its first part's message. Whatever
has no typed place is kept under ``metadata["pydantic_ai"]``; an encoding that would not
decode to the same JSON keeps the whole message there instead, and one whose untyped part is
over the store's 1 MiB beside the payload (an inline ``BinaryContent``, a large tool return)
is kept whole as JSON text in ``content`` (bounded by ``max_message_bytes``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from threadkeep import Message, Reasoning, Role, ToolCall

from .._sizes import fits_beside_payload

__all__ = ["METADATA_KEY", "from_threadkeep", "to_threadkeep"]

METADATA_KEY = "pydantic_ai"
"""The ``Message.metadata`` key holding what of a model message is not stored typed."""

_REQUEST_ROLES = {"system-prompt": Role.SYSTEM, "user-prompt": Role.USER}


def _dump(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")  # type: ignore[no-any-return]


# -- responses -------------------------------------------------------------------------------


def _encode_response(data: dict[str, Any]) -> Message:
    texts: list[str] = []
    calls: list[ToolCall] = []
    thoughts: list[Reasoning] = []
    parts: list[dict[str, Any]] = []
    for part in data["parts"]:
        kind = part.get("part_kind")
        rest = dict(part)
        if kind == "text" and isinstance(part.get("content"), str):
            texts.append(rest.pop("content"))
            rest["length"] = len(texts[-1])
        elif kind == "tool-call" and isinstance(part.get("tool_call_id"), str):
            args = rest.pop("args")
            rest["args_json"] = not isinstance(args, str)
            calls.append(
                ToolCall(
                    agui_id=rest.pop("tool_call_id"),
                    name=rest.pop("tool_name"),
                    arguments=args if isinstance(args, str) else json.dumps(args),
                )
            )
        elif kind == "thinking" and isinstance(part.get("content"), str):
            signature = rest.pop("signature", None)
            thoughts.append(Reasoning(content=rest.pop("content"), encrypted_value=signature))
        parts.append(rest)
    usage = data.get("usage") or {}
    tokens = (usage.get("input_tokens") or 0) + (usage.get("output_tokens") or 0)
    header = {k: v for k, v in data.items() if k != "parts"}
    return Message(
        role=Role.ASSISTANT,
        content="".join(texts),
        tool_calls=calls,
        reasonings=thoughts,
        tokens=tokens or None,
        metadata={METADATA_KEY: {"response": header, "parts": parts}},
    )


def _decode_response(message: Message, meta: dict[str, Any]) -> dict[str, Any]:
    calls = iter(message.tool_calls)
    thoughts = iter(message.reasonings)
    offset = 0
    parts: list[dict[str, Any]] = []
    for stored in meta["parts"]:
        part = dict(stored)
        kind = part.get("part_kind")
        if kind == "text" and "length" in part:
            end = offset + part.pop("length")
            part["content"] = message.content[offset:end]
            offset = end
        elif kind == "tool-call" and "args_json" in part:
            call = next(calls)
            raw = call.arguments
            part.update(
                tool_call_id=call.agui_id,
                tool_name=call.name,
                args=json.loads(raw) if part.pop("args_json") else raw,
            )
        elif kind == "thinking" and "content" not in part:
            thought = next(thoughts)
            part.update(content=thought.content, signature=thought.encrypted_value)
        parts.append(part)
    return {**meta["response"], "parts": parts}


# -- requests --------------------------------------------------------------------------------


def _encode_request_part(part: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (message fields, residue) for one request part."""
    kind = part.get("part_kind")
    rest = dict(part)
    fields: dict[str, Any] = {"role": _REQUEST_ROLES.get(str(kind), Role.USER)}
    if isinstance(part.get("tool_call_id"), str) and kind in ("tool-return", "retry-prompt"):
        fields.update(role=Role.TOOL, tool_call_ref=rest.pop("tool_call_id"))
    if isinstance(part.get("content"), str):
        fields["content"] = rest.pop("content")
    return fields, rest


def _encode_request(data: dict[str, Any]) -> list[Message]:
    header = {k: v for k, v in data.items() if k != "parts"}
    messages: list[Message] = []
    for index, part in enumerate(data["parts"] or [{}]):
        fields, rest = _encode_request_part(part) if part else ({"role": Role.USER}, None)
        meta: dict[str, Any] = {"part": rest}
        if index == 0:
            meta.update(request=header, count=len(data["parts"]))
        messages.append(Message(**fields, metadata={METADATA_KEY: meta}))
    return messages


def _decode_request_part(message: Message, meta: dict[str, Any]) -> dict[str, Any]:
    part = dict(meta["part"])
    if message.tool_call_ref is not None and "tool_call_id" not in part:
        part["tool_call_id"] = message.tool_call_ref
    if "content" not in part:
        part["content"] = message.content
    return part


# -- whole messages --------------------------------------------------------------------------


def _encode(data: dict[str, Any]) -> list[Message]:
    if data.get("kind") == "response":
        return [_encode_response(data)]
    return _encode_request(data)


def to_threadkeep(messages: Sequence[ModelMessage]) -> list[Message]:
    """Return the threadkeep messages that store ``messages`` (a run's ``new_messages()``).

    Raises:
        pydantic_core.PydanticSerializationError: If a message holds a value Pydantic AI
            itself cannot serialize.
    """
    stored: list[Message] = []
    for data in _dump(messages):
        encoded = _encode(data)
        if _decode_all(encoded) != [data] or not all(map(fits_beside_payload, encoded)):
            encoded = [_whole(data)]
        stored += encoded
    return stored


def _whole(data: dict[str, Any]) -> Message:
    """The message kept whole: in metadata, or as JSON text in ``content`` when it is large.

    ``content`` is the payload, bounded by ``max_message_bytes`` rather than by the 1 MiB a
    message holds beside it (an inline image's base64, a large tool return).
    """
    role = Role.ASSISTANT if data.get("kind") == "response" else Role.USER
    whole = Message(role=role, metadata={METADATA_KEY: {"message": data}})
    if fits_beside_payload(whole):
        return whole
    text = json.dumps(data, ensure_ascii=False)  # JSON-mode data: always has a JSON form
    return Message(role=role, content=text, metadata={METADATA_KEY: {"json": True}})


def _decode_all(messages: Sequence[Message]) -> list[dict[str, Any]]:
    decoded: list[dict[str, Any]] = []
    request: dict[str, Any] | None = None
    for message in messages:
        meta = message.metadata.get(METADATA_KEY)
        if not isinstance(meta, dict):
            continue
        if "message" in meta:
            decoded.append(meta["message"])
        elif meta.get("json") is True:
            decoded.append(json.loads(message.content))
        elif "response" in meta:
            decoded.append(_decode_response(message, meta))
        elif "request" in meta:
            request = {**meta["request"], "parts": []}
            decoded.append(request)
            if meta["part"] is not None:
                request["parts"].append(_decode_request_part(message, meta))
        elif "part" in meta and request is not None:
            request["parts"].append(_decode_request_part(message, meta))
    return decoded


def from_threadkeep(messages: Sequence[Message]) -> list[ModelMessage]:
    """Return the Pydantic AI messages that threadkeep ``messages`` (oldest first) store.

    Messages this module wrote are read back exactly; messages of other threadkeep clients
    (no ``pydantic_ai`` metadata) are left out.

    Raises:
        pydantic.ValidationError: If stored metadata was altered into an invalid message.
    """
    return ModelMessagesTypeAdapter.validate_python(_decode_all(messages))
