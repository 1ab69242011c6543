"""Claude Code lines of one chat become threadkeep messages.

See ``docs/importers.md`` ("claude-code") for the table. In short: the lines of one API
message (same ``message.id``) fold into one assistant message at the place of the first;
``text`` blocks are its content, ``thinking`` / ``redacted_thinking`` blocks its reasonings
(the signature kept as ``encrypted_value``), ``tool_use`` blocks its tool calls (the input
written back as the exact JSON text of the line); each ``tool_result`` block of a user line
is a tool message answering its call, and ``is_error`` makes that call ``errored``; a
``compact_boundary`` system line is a compaction boundary whose content is the summary the
next line carries.
"""

from __future__ import annotations

from typing import Any

from .._content import dump_json, validate_model
from .._errors import InvalidArgument
from .._models import Message
from ._claude_tree import Line
from ._files import aware_timestamp
from ._jsontext import js_stringify
from ._native import bounded_fields, check_message

__all__ = ["MAX_KEPT_RESULT_BYTES", "chat_messages", "trim_result"]

MAX_KEPT_RESULT_BYTES = 64 * 1024
"""A line's ``toolUseResult`` (the tool's structured output, mostly a copy of the result
text) is kept in metadata up to this many bytes of JSON; a larger one is noted by size and
keys (the result text itself is always kept, as the tool message's content)."""

_SESSION_KEYS = frozenset(
    {"message", "type", "uuid", "parentUuid", "sessionId", "cwd", "version", "gitBranch"}
    | {"userType", "isSidechain", "toolUseResult", "toolUseResult_omitted", "slug"}
)


class _Builder:
    """Collects the messages of one chat, folding the lines of one API message."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.messages: list[tuple[dict[str, Any], str]] = []  # (fields, where)
        self.calls: dict[str, dict[str, Any]] = {}
        self.assistants: dict[str, dict[str, Any]] = {}
        self.pending_boundary: dict[str, Any] | None = None

    def where_line(self, line: Line) -> str:
        return f"{self.where}: line {line.number}"

    def add(self, fields: dict[str, Any], line: Line) -> dict[str, Any]:
        self.messages.append((fields, self.where_line(line)))
        return fields

    def build(self, max_message_bytes: int) -> list[Message]:
        built = []
        for fields, where in self.messages:
            try:
                message = validate_model(Message, fields)
            except InvalidArgument as exc:
                raise InvalidArgument(f"{where}: {exc}") from exc
            built.append(check_message(message, where, max_message_bytes))
        return built


def chat_messages(lines: list[Line], where: str, max_message_bytes: int) -> list[Message]:
    """Convert the lines of one chat, in file order, to messages, and check each.

    Args:
        lines: The chat's lines (see :func:`split_branches`).
        where: The file name, for error messages.
        max_message_bytes: The store's payload limit (``store.max_message_bytes``).

    Returns:
        The messages, in order; ids are deterministic (line ``uuid``, API ``message.id``).

    Raises:
        InvalidArgument: If a line's content does not have the shape of its type; naming
            the file, the line and the field.
        InvalidContent / PayloadTooLarge: If a message is one the store would refuse
            (:func:`check_message`), naming the file and the line.
    """
    builder = _Builder(where)
    for line in lines:
        kind = line.data.get("type")
        if kind == "assistant":
            _assistant(builder, line)
        elif kind == "user":
            _user(builder, line)
        else:
            _system(builder, line)
    return builder.build(max_message_bytes)


def _metadata(line: Line, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    kept = bounded_fields({k: v for k, v in line.data.items() if k not in _SESSION_KEYS})
    kept["uuid"] = line.uuid
    if line.parent is not None:
        kept["parentUuid"] = line.parent
    return {"claude_code": {**kept, **(extra or {})}}


def _blocks(line: Line, builder: _Builder) -> list[Any]:
    message = line.data.get("message")
    if not isinstance(message, dict):
        raise InvalidArgument(f"{builder.where_line(line)}: message is not a JSON object")
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if content is None:
        return []
    if not isinstance(content, list):
        kind = type(content).__name__
        raise InvalidArgument(f"{builder.where_line(line)}: message.content is a {kind}")
    return content


def _assistant(builder: _Builder, line: Line) -> None:
    blocks = _blocks(line, builder)
    key = line.message_id or line.uuid
    message = builder.assistants.get(key)
    if message is None:
        api = {k: v for k, v in line.data["message"].items() if k not in {"content", "role"}}
        message = builder.add(
            {
                "agui_id": key,
                "role": "assistant",
                "content": "",
                "parts": [],
                "tool_calls": [],
                "reasonings": [],
                "created_at": aware_timestamp(line.data.get("timestamp")),
                "metadata": _metadata(line, {"message": api}),
            },
            line,
        )
        builder.assistants[key] = message
    else:
        extra = message["metadata"]["claude_code"]
        extra.setdefault("uuids", [extra["uuid"]]).append(line.uuid)
        usage = line.data["message"].get("usage")
        if usage is not None:  # every line repeats the usage; the last one is final
            extra["message"]["usage"] = usage
    for index, block in enumerate(blocks):
        _assistant_block(builder, line, message, block, index)
    if line.data.get("isApiErrorMessage") is True:  # Claude Code's note of a failed request
        message["status"] = "errored"
    usage = message["metadata"]["claude_code"]["message"].get("usage")
    tokens = usage.get("output_tokens") if isinstance(usage, dict) else None
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
        message["tokens"] = tokens


def _assistant_block(
    builder: _Builder, line: Line, message: dict[str, Any], block: Any, index: int
) -> None:
    where = f"{builder.where_line(line)}: message.content[{index}]"
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise InvalidArgument(f"{where} has no 'type'")
    kind = block["type"]
    if kind == "text":
        message["content"] += _text(block, "text", where)
        details = {k: v for k, v in block.items() if k not in {"type", "text"} and v}
        if details:  # citations and the like: kept beside the text
            message["parts"].append({"type": "custom", "name": "text_details", "value": details})
    elif kind in {"thinking", "redacted_thinking"}:
        message["reasonings"].append(_reasoning(block, kind, message, where))
    elif kind in {"tool_use", "server_tool_use"}:
        call = _call(block, kind, where)
        builder.calls[call["agui_id"]] = call
        message["tool_calls"].append(call)
    else:
        message["parts"].append(_part(block))


def _text(block: dict[str, Any], key: str, where: str) -> str:
    text = block.get(key, "")
    if not isinstance(text, str):
        raise InvalidArgument(f"{where}.{key} is a {type(text).__name__}, not a string")
    return text


def _reasoning(
    block: dict[str, Any], kind: str, message: dict[str, Any], where: str
) -> dict[str, Any]:
    agui_id = f"{message['agui_id']}:reasoning:{len(message['reasonings'])}"
    if kind == "redacted_thinking":
        data = _text(block, "data", where)
        return {"agui_id": agui_id, "name": kind, "encrypted_value": data}
    signature = block.get("signature")
    return {
        "agui_id": agui_id,
        "content": _text(block, "thinking", where),
        "encrypted_value": signature if isinstance(signature, str) and signature else None,
    }


def _call(block: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    call_id, name = block.get("id"), block.get("name")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidArgument(f"{where}.id is missing (a tool_use block needs its id)")
    if not isinstance(name, str):
        raise InvalidArgument(f"{where}.name is missing")
    call: dict[str, Any] = {
        "agui_id": call_id,
        "name": name,
        "arguments": js_stringify(block.get("input", {})),
    }
    if kind != "tool_use":
        call["type"] = kind  # an extra field: the store keeps it
    extras = {k: v for k, v in block.items() if k not in {"type", "id", "name", "input"}}
    if extras:
        call["claude_code"] = extras
    return call


def _part(block: dict[str, Any]) -> dict[str, Any]:
    """A content block other than text, tool use/result and thinking, as a typed part."""
    kind = block["type"]
    source = block.get("source")
    if kind == "image" and isinstance(source, dict) and source.get("type") == "base64":
        return {"type": "image", "data": source.get("data"), "mime_type": source.get("media_type")}
    if kind == "image" and isinstance(source, dict) and source.get("type") == "url":
        return {"type": "image", "url": source.get("url")}
    if kind == "document" and isinstance(source, dict):
        rest = {k: v for k, v in block.items() if k != "type"}
        return {"type": "file", "mime_type": source.get("media_type"), "claude_code": rest}
    return {
        "type": "custom",
        "name": kind,
        "value": {k: v for k, v in block.items() if k != "type"},
    }


def _user(builder: _Builder, line: Line) -> None:
    if builder.pending_boundary is not None and line.data.get("isCompactSummary"):
        _summary(builder, line)
        return
    builder.pending_boundary = None
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for index, block in enumerate(_blocks(line, builder)):
        where = f"{builder.where_line(line)}: message.content[{index}]"
        if isinstance(block, str):
            texts.append(block)
        elif not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise InvalidArgument(f"{where} has no 'type'")
        elif block["type"] == "tool_result":
            builder.add(_tool_message(builder, line, block, index, where), line)
        elif block["type"] == "text":
            texts.append(_text(block, "text", where))
        else:
            parts.append(_part(block))
    if texts or parts or line.answers is None:
        metadata = _metadata(line)
        if len(texts) > 1:
            metadata["text_part_lengths"] = [len(text) for text in texts]
        fields = {"agui_id": line.uuid, "role": "user", "content": "".join(texts)}
        builder.add(
            {
                **fields,
                "parts": parts,
                "created_at": aware_timestamp(line.data.get("timestamp")),
                "metadata": metadata,
            },
            line,
        )


def _tool_message(
    builder: _Builder, line: Line, block: dict[str, Any], index: int, where: str
) -> dict[str, Any]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidArgument(f"{where}.tool_use_id is missing")
    texts, parts = _result_content(block.get("content"), where)
    is_error = block.get("is_error") is True
    call = builder.calls.get(call_id)
    if call is not None and is_error:
        call["status"] = "errored"
    extra: dict[str, Any] = {"is_error": True} if is_error else {}
    for key in ("toolUseResult", "toolUseResult_omitted"):
        if key in line.data:
            extra[key] = line.data[key]
    metadata = _metadata(line, extra)
    if len(texts) > 1:
        metadata["text_part_lengths"] = [len(text) for text in texts]
    return {
        "agui_id": f"{line.uuid}#{index}",
        "role": "tool",
        "content": "".join(texts),
        "parts": parts,
        "tool_call_ref": call_id,
        "created_at": aware_timestamp(line.data.get("timestamp")),
        "metadata": metadata,
    }


def _result_content(value: Any, where: str) -> tuple[list[str], list[dict[str, Any]]]:
    if value is None:
        return [], []
    if isinstance(value, str):
        return [value], []
    if not isinstance(value, list):
        raise InvalidArgument(f"{where}.content is a {type(value).__name__}")
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for number, item in enumerate(value):
        if isinstance(item, dict) and item.get("type") == "text":
            texts.append(_text(item, "text", f"{where}.content[{number}]"))
        elif isinstance(item, dict) and isinstance(item.get("type"), str):
            parts.append(_part(item))
        else:
            raise InvalidArgument(f"{where}.content[{number}] has no 'type'")
    return texts, parts


def trim_result(line: dict[str, Any]) -> dict[str, Any]:
    """Return ``line`` with a ``toolUseResult`` over :data:`MAX_KEPT_RESULT_BYTES` noted.

    Done as each line is read, so a large copy of a tool's output is not held in memory;
    the note (``toolUseResult_omitted``) gives its size in bytes and its keys.
    """
    result = line.get("toolUseResult")
    if result is None:
        return line
    size = len(dump_json(result).encode("utf-8"))
    if size <= MAX_KEPT_RESULT_BYTES:
        return line
    keys = sorted(result) if isinstance(result, dict) else []
    trimmed = {k: v for k, v in line.items() if k != "toolUseResult"}
    trimmed["toolUseResult_omitted"] = {"bytes": size, "keys": keys}
    return trimmed


def _system(builder: _Builder, line: Line) -> None:
    builder.pending_boundary = None
    content = line.data.get("content")
    fields: dict[str, Any] = {
        "agui_id": line.uuid,
        "role": "system",
        "content": content if isinstance(content, str) else "",
        "created_at": aware_timestamp(line.data.get("timestamp")),
        "metadata": _metadata(line),
    }
    if line.data.get("subtype") == "compact_boundary" and builder.messages:
        # upto_seq is set when it is written: the seq of the message before it.
        fields |= {"kind": "boundary", "boundary": {"reason": "compaction"}}
        builder.pending_boundary = fields
    builder.add(fields, line)


def _summary(builder: _Builder, line: Line) -> None:
    """Fold the summary line after a compaction boundary into that boundary."""
    boundary = builder.pending_boundary
    assert boundary is not None
    builder.pending_boundary = None
    texts = [
        _text(b, "text", builder.where_line(line)) if isinstance(b, dict) else str(b)
        for b in _blocks(line, builder)
        if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
    ]
    boundary["content"] = "".join(texts)
    boundary["metadata"]["claude_code"]["summary_line"] = _metadata(line)["claude_code"]
