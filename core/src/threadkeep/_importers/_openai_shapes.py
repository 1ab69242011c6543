"""The other OpenAI transcript shapes: legacy function calling and the Responses API items.

Both are read by ``--format openai`` beside chat completions (``docs/importers.md``):

- legacy function calling (before ``tool_calls``): an assistant message's
  ``function_call: {name, arguments}`` becomes one tool call and a ``role: "function"``
  message the tool message answering it. Neither has an id, so the call gets
  ``openai:<position>:function_call`` (``<position>`` is the assistant message's index) and
  an answer links to the newest unanswered call of its ``name`` (else the newest unanswered
  call);
- a Responses API item list (``type``: ``message``, ``function_call``,
  ``function_call_output``, ``reasoning``, other ``*_call`` / ``*_call_output`` items):
  reasoning items and calls attach to the assistant message of their turn, each
  ``function_call_output`` is the tool message answering ``call_id``, and a reasoning's
  ``encrypted_content`` is kept as the reasoning's ``encrypted_value``.
"""

from __future__ import annotations

from typing import Any

from .._content import validate_model
from .._errors import InvalidArgument
from .._models import Message
from ._jsontext import js_stringify

__all__ = ["is_responses", "legacy_entries", "responses_messages"]

_RESPONSE_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning"})


def legacy_entries(entries: list[Any]) -> tuple[list[Any], set[int]]:
    """Rewrite legacy ``function_call`` / ``role: "function"`` entries as tool calls.

    Args:
        entries: A record's chat-completions messages (not yet checked).

    Returns:
        The entries with legacy ones rewritten (others untouched, the list copied) and the
        positions of the ``role: "function"`` answers (their metadata records that role).
    """
    rewritten: list[Any] = []
    open_calls: list[tuple[str, str]] = []  # (call id, function name), oldest first
    answers: set[int] = set()
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            rewritten.append(entry)
        elif entry.get("role") == "assistant" and isinstance(entry.get("function_call"), dict):
            call = entry["function_call"]
            call_id = f"openai:{position}:function_call"
            open_calls.append((call_id, str(call.get("name", ""))))
            body = {k: v for k, v in entry.items() if k != "function_call"}
            body["tool_calls"] = [*(entry.get("tool_calls") or []), _legacy_call(call_id, call)]
            rewritten.append(body)
        elif entry.get("role") == "function":
            answers.add(position)
            body = {k: v for k, v in entry.items() if k != "role"}
            body["role"] = "tool"
            body["tool_call_id"] = _answered(open_calls, entry.get("name"))
            rewritten.append(body)
        else:
            rewritten.append(entry)
    return rewritten, answers


def _legacy_call(call_id: str, call: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": call}


def _answered(open_calls: list[tuple[str, str]], name: Any) -> str | None:
    for index in range(len(open_calls) - 1, -1, -1):
        if open_calls[index][1] == name:
            return open_calls.pop(index)[0]
    return open_calls.pop()[0] if open_calls else None


def is_responses(entries: list[Any]) -> bool:
    """Whether ``entries`` is a Responses API item list (an item has a known ``type``)."""
    return any(isinstance(e, dict) and e.get("type") in _RESPONSE_TYPES for e in entries)


class _Turn:
    """Builds the messages of an item list: the open assistant message and its reasonings."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.messages: list[dict[str, Any]] = []
        self.assistant: dict[str, Any] | None = None
        self.reasonings: list[dict[str, Any]] = []
        self.reasoning_from: int | None = None  # the position of the first pending reasoning

    def open_assistant(self, position: int) -> dict[str, Any]:
        if self.assistant is None:
            start = position if self.reasoning_from is None else self.reasoning_from
            self.assistant = _fields(start, "assistant")
            self.messages.append(self.assistant)
        self.assistant["reasonings"] += self.reasonings
        self.reasonings, self.reasoning_from = [], None
        return self.assistant

    def close(self) -> None:
        self.assistant = None


def responses_messages(items: list[Any], where: str) -> list[Message]:
    """Convert a Responses API item list to messages (see the module docstring).

    Args:
        items: The items, in order (``input`` items, then ``output`` items).
        where: The file and record, for error messages.

    Returns:
        The messages; message ``n`` has ``agui_id`` ``openai:<index of its first item>``.

    Raises:
        InvalidArgument: If an item is not an object or lacks what its type needs; naming
            the record and the item.
    """
    turn = _Turn(where)
    for position, item in enumerate(items):
        item_where = f"{where}, item {position}"
        if not isinstance(item, dict):
            raise InvalidArgument(f"{item_where} is a {type(item).__name__}, not a JSON object")
        _item(turn, position, item, item_where)
    if turn.reasonings:
        turn.open_assistant(len(items))
    built = []
    for fields in turn.messages:
        try:
            built.append(validate_model(Message, fields))
        except InvalidArgument as exc:
            raise InvalidArgument(f"{where}, item {fields['agui_id'][7:]}: {exc}") from exc
    return built


def _fields(position: int, role: str) -> dict[str, Any]:
    return {
        "agui_id": f"openai:{position}",
        "role": role,
        "content": "",
        "parts": [],
        "tool_calls": [],
        "reasonings": [],
        "metadata": {},
    }


def _item(turn: _Turn, position: int, item: dict[str, Any], where: str) -> None:
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        _message(turn, position, item, where)
    elif kind == "reasoning":
        if turn.reasoning_from is None:
            turn.reasoning_from = position
        turn.reasonings.append(_reasoning(item, position))
    elif isinstance(kind, str) and kind.endswith("_call_output"):
        turn.close()
        turn.messages.append(_output(position, item, kind, where))
    elif isinstance(kind, str) and kind.endswith("_call"):
        turn.open_assistant(position)["tool_calls"].append(_call(item, kind, where))
    elif isinstance(kind, str):
        rest = {k: v for k, v in item.items() if k != "type"}
        turn.open_assistant(position)["parts"].append(
            {"type": "custom", "name": kind, "value": rest}
        )
    else:
        raise InvalidArgument(f"{where} has no 'type' (and no 'role')")


def _message(turn: _Turn, position: int, item: dict[str, Any], where: str) -> None:
    role = item.get("role")
    if role not in {"user", "assistant", "system", "developer"}:
        raise InvalidArgument(
            f"{where} has role {role!r}; expected user, assistant, system or developer"
        )
    if role == "assistant":
        turn.close()
        fields = turn.open_assistant(position)
    else:
        turn.close()
        fields = _fields(position, str(role))
        turn.messages.append(fields)
    texts, parts = _content(item.get("content"), where)
    fields["content"] += "".join(texts)
    fields["parts"] += parts
    extras = {k: v for k, v in item.items() if k not in {"type", "role", "content"}}
    if extras:
        fields["metadata"]["openai"] = extras
    if len(texts) > 1:
        fields["metadata"]["text_part_lengths"] = [len(text) for text in texts]


def _content(value: Any, where: str) -> tuple[list[str], list[dict[str, Any]]]:
    if value is None:
        return [], []
    if isinstance(value, str):
        return [value], []
    if not isinstance(value, list):
        raise InvalidArgument(f"{where}: content is a {type(value).__name__}")
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for number, part in enumerate(value):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise InvalidArgument(f"{where}: content part {number} has no 'type'")
        kind = part["type"]
        if kind in {"input_text", "output_text", "text"} and isinstance(part.get("text"), str):
            texts.append(part["text"])
            extras = {k: v for k, v in part.items() if k not in {"type", "text"} and v}
            if extras:
                parts.append({"type": "custom", "name": f"{kind}_details", "value": extras})
        elif kind == "input_image" and isinstance(part.get("image_url"), str | None):
            rest = {k: v for k, v in part.items() if k not in {"type", "image_url"}}
            parts.append({"type": "image", "url": part.get("image_url"), **rest})
        elif kind == "input_file":
            rest = {k: v for k, v in part.items() if k != "type"}
            parts.append({"type": "file", **rest})
        else:
            rest = {k: v for k, v in part.items() if k != "type"}
            parts.append({"type": "custom", "name": kind, "value": rest})
    return texts, parts


def _reasoning(item: dict[str, Any], position: int) -> dict[str, Any]:
    summary = item.get("summary") or []
    content = item.get("content") or []
    texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    if not texts:
        texts = [
            p["text"] for p in summary if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
    reasoning: dict[str, Any] = {
        "agui_id": item.get("id")
        if isinstance(item.get("id"), str)
        else f"openai:{position}:reasoning",
        "content": "\n\n".join(texts),
        "encrypted_value": item.get("encrypted_content"),
    }
    if summary:
        reasoning["summary"] = summary  # an extra field: the store keeps it
    if item.get("status") is not None:
        reasoning["openai_status"] = item["status"]
    return reasoning


def _call(item: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    call_id = item.get("call_id") or item.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidArgument(f"{where}: a {kind} item needs a 'call_id'")
    arguments = item.get("arguments", item.get("input"))
    if arguments is None:
        arguments = {
            k: v for k, v in item.items() if k not in {"type", "id", "call_id", "name", "status"}
        }
    call: dict[str, Any] = {
        "agui_id": call_id,
        "name": item.get("name") if isinstance(item.get("name"), str) else kind,
        "arguments": arguments if isinstance(arguments, str) else js_stringify(arguments),
    }
    if kind != "function_call":
        call["type"] = kind
    extras = {k: item[k] for k in ("id", "status") if k in item and item[k] != call_id}
    if extras:
        call["openai"] = extras
    return call


def _output(position: int, item: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidArgument(f"{where}: a {kind} item needs a 'call_id'")
    fields = _fields(position, "tool")
    output = item.get("output")
    parts: list[dict[str, Any]] = []
    if isinstance(output, str) or output is None:
        texts = [output] if output else []
    elif isinstance(output, list):
        texts, parts = _content(output, where)
    else:
        texts = [js_stringify(output)]
        fields["metadata"]["output_json"] = True
    fields |= {"content": "".join(texts), "parts": parts, "tool_call_ref": call_id}
    extras = {k: v for k, v in item.items() if k not in {"type", "call_id", "output"}}
    if kind != "function_call_output":
        extras["type"] = kind
    if extras:
        fields["metadata"]["openai"] = extras
    return fields
