"""OpenAI chat-completions transcripts become chats (``threadkeep import --format openai``).

Input: a JSON array of records, one JSON object, or JSON Lines. A record holds its message
list under ``messages`` or ``traj`` (tau-bench's name), or is itself that list; a Responses
API record holds items under ``input`` and/or ``output`` (or is that list), and legacy
``function_call`` entries are read too (both in :mod:`threadkeep._importers._openai_shapes`).
Each record becomes one chat, each entry one message:

- ``role`` is kept; ``content`` ``null`` becomes ``""``; content given as a list of parts
  keeps the text of its ``text`` parts exactly (concatenated; the lengths are kept in
  ``metadata["text_part_lengths"]`` when there are several) and turns the other parts into
  typed parts (``image_url`` -> image, ``file`` -> file, anything else -> custom).
- assistant ``tool_calls`` become nested ``ToolCall``s: ``agui_id`` is the OpenAI call id,
  ``arguments`` the exact string; a ``tool`` message's ``tool_call_id`` becomes its
  ``tool_call_ref``, linking the result to its call.
- every other field of the entry (``name``, ``refusal``, a ``null`` content...) is kept
  verbatim in ``metadata["openai"]``.

Keys are deterministic, so a second import of the same file changes nothing: the chat's
``thread_id`` is ``openai:<file name>:<record index>`` (``openai:<file name>:id=<id>`` when
the record has an ``id``) and message ``n`` of a record has ``agui_id`` ``openai:<n>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._content import PreparedMessage, validate_model
from .._encode_bulk import encode_for_load
from .._errors import InvalidArgument
from .._models import Message, Role
from . import ImportReport, ProgressCallback
from ._files import check_record
from ._openai_shapes import is_responses, legacy_entries, responses_messages
from ._shape import shape_checked
from ._write import import_records
from ._write import record_digest as digest_of

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["MESSAGE_LIST_KEYS", "convert_message", "import_openai", "thread_id_for"]

MESSAGE_LIST_KEYS = ("messages", "traj")
"""Where a record keeps its message list, in the order they are looked up."""

_MAPPING = "openai-1"
"""Part of every record digest: change it when the mapping changes, so a re-import of a
file imported with the old mapping converts its records again instead of trusting them."""

_MAPPED_KEYS = frozenset({"role", "tool_calls", "tool_call_id"})
_ROLE_VALUES = frozenset(role.value for role in Role)
_ROLES = ", ".join(role.value for role in Role)


@dataclass(frozen=True, slots=True)
class _Conversation:
    thread_id: str
    name: str
    metadata: dict[str, Any]
    messages: list[Message]
    where: str
    prepared: list[PreparedMessage] = field(default_factory=list)
    """``messages`` checked and encoded (``Store.prepare``'s result), loaded as they are."""


async def import_openai(
    store: Store,
    path: str | PathLike[str],
    *,
    user_id: str,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import an OpenAI chat-completions transcript file into ``store``.

    Every record of the file is checked and converted before anything is written, so a
    malformed record anywhere writes nothing. Messages then go in with ``load_messages``
    (the store's bulk path: ``COPY`` on PostgreSQL) in batches of up to 5,000 (all or
    nothing per batch), and the record's digest is stored in the chat's
    ``metadata["source"]["digest"]``; a re-import finds a record whose digest is stored
    with one read and neither converts nor writes it. See the module docstring for the
    mapping and the deterministic keys.

    Args:
        store: An open store.
        path: The transcript file (JSON array, one JSON object, or JSON Lines; UTF-8).
        user_id: Owner of the imported chats (non-empty).
        progress: Called as ``progress(0, records_total)`` once every record is checked,
            then as ``progress(records_done, records_total)`` after each record is stored.

    Returns:
        Counts of chats, messages and tool calls, created versus already present.

    Raises:
        InvalidArgument: If the file is missing, unreadable or malformed, or a record or
            message does not have the expected shape or cannot be stored (``InvalidContent``,
            ``PayloadTooLarge``); the message names the file, the record (and its line in
            JSON Lines) and the entry. Nothing is written then.
        IdempotencyConflict: If a chat was imported before from a file with different
            content at the same position.
        ThreadkeepError: Any error of the store (for example ``BackendUnavailable``);
            records before the failing one stay imported and a re-run completes the rest.
    """
    source = Path(path)
    max_bytes = store.max_message_bytes
    return await import_records(
        store,
        source,
        user_id=user_id,
        progress=progress,
        mapping=_MAPPING,
        convert=lambda record, index, line: _conversation(
            record, source.name, index, line, max_bytes
        ),
        thread_of=lambda index, record: thread_id_for(source.name, index, record),
        count_of=_counts,
    )


def record_digest(record: Any) -> str:
    """Return a record's import proof (see :func:`._write.record_digest`), this mapping's."""
    return digest_of(record, _MAPPING)


def _counts(record: Any) -> tuple[int, int]:
    """A record's messages and tool calls, counted on the raw record (no conversion)."""
    entries = _raw_entries(record)
    calls = sum(len(e.get("tool_calls") or []) for e in entries if isinstance(e, dict))
    return len(entries), calls


def _raw_entries(record: Any) -> list[Any]:
    if isinstance(record, list):
        return record
    for key in MESSAGE_LIST_KEYS:
        if isinstance(record.get(key), list):
            entries: list[Any] = record[key]
            return entries
    return []


def thread_id_for(file_name: str, index: int, record: Any) -> str:
    """Return the deterministic ``thread_id`` of a record (see the module docstring).

    Args:
        file_name: The transcript's file name, without directories.
        index: The record's position in the file, from 0.
        record: The record; its ``id`` (a non-empty string or an integer) is used if present.
    """
    record_id = record.get("id") if isinstance(record, dict) else None
    if isinstance(record_id, int) and not isinstance(record_id, bool):
        record_id = str(record_id)
    if isinstance(record_id, str) and record_id:
        return f"openai:{file_name}:id={record_id}"
    return f"openai:{file_name}:{index}"


def _conversation(
    record: Any, file_name: str, index: int, line: int | None, max_message_bytes: int
) -> _Conversation:
    where = f"{file_name}: record {index}" + (f" (line {line})" if line is not None else "")
    check_record(record, where)
    with shape_checked(where):
        messages = _messages(_entries(record, where), where)
    prepared = []
    for position, message in enumerate(messages):
        try:  # what the store would refuse, refused before anything is written
            prepared.append(encode_for_load(message, max_message_bytes))
        except InvalidArgument as exc:
            raise type(exc)(f"{where}, message {position}: {exc}") from exc
    fields = {}
    if isinstance(record, dict):
        fields = {k: v for k, v in record.items() if _is_scalar(v) and k not in {"id"}}
    metadata = {"source": {"format": "openai", "file": file_name, "record": index, **fields}}
    return _Conversation(
        thread_id=thread_id_for(file_name, index, record),
        name=f"{file_name} #{index}",
        metadata=metadata,
        messages=messages,
        where=where,
        prepared=prepared,
    )


def _messages(entries: list[Any], where: str) -> list[Message]:
    """Convert a record's entries: a Responses item list, else (legacy) chat completions."""
    if is_responses(entries):
        return responses_messages(entries, where)
    rewritten, function_answers = legacy_entries(entries)
    messages = []
    for position, entry in enumerate(rewritten):
        message = convert_message(entry, position, where=f"{where}, message {position}")
        if position in function_answers:  # a legacy answer: say which role it had
            message.metadata.setdefault("openai", {})["role"] = "function"
        messages.append(message)
    return messages


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _entries(record: Any, where: str) -> list[Any]:
    if isinstance(record, list):
        return record
    if not isinstance(record, dict):
        raise InvalidArgument(f"{where} is a {type(record).__name__}, not a JSON object")
    for key in MESSAGE_LIST_KEYS:
        if isinstance(record.get(key), list):
            entries: list[Any] = record[key]
            return entries
    given = record.get("input")
    if isinstance(given, list | str) or isinstance(record.get("output"), list):
        # A Responses API request (input items, or text), response (output items), or both.
        items = [{"role": "user", "content": given}] if isinstance(given, str) else given or []
        return [*items, *(record.get("output") or [])]
    hint = ' (a single message? wrap the list as {"messages": [...]})' if "role" in record else ""
    nor = " (nor Responses API 'input'/'output' items)"
    raise InvalidArgument(f"{where} has no 'messages' or 'traj' list{nor}{hint}")


def convert_message(entry: Any, position: int, *, where: str = "message") -> Message:
    """Convert one chat-completions message to a ``Message`` (see the module docstring).

    Args:
        entry: The message object (``role``, ``content``, ``tool_calls``, ``tool_call_id``...).
        position: Its index in the record, from 0; gives ``agui_id`` ``openai:<position>``.
        where: Where the entry is, for error messages.

    Returns:
        The message, not yet stored.

    Raises:
        InvalidArgument: If the entry is not an object, its role is not a threadkeep role,
            or its content or tool calls do not have the chat-completions shape.
    """
    if not isinstance(entry, dict):
        raise InvalidArgument(f"{where} is a {type(entry).__name__}, not a JSON object")
    role = entry.get("role")
    if not isinstance(role, str) or role not in _ROLE_VALUES:
        raise InvalidArgument(f"{where} has role {role!r}; expected one of: {_ROLES}")
    content, parts, text_lengths = _content(entry.get("content"), where)
    metadata: dict[str, Any] = {}
    extras = {
        k: v
        for k, v in entry.items()
        if k not in _MAPPED_KEYS and not (k == "content" and isinstance(v, str | list))
    }
    if extras:
        metadata["openai"] = extras
    if len(text_lengths) > 1:
        metadata["text_part_lengths"] = text_lengths
    data = {
        "agui_id": f"openai:{position}",
        "role": role,
        "content": content,
        "parts": parts,
        "tool_calls": _tool_calls(entry.get("tool_calls"), where),
        "tool_call_ref": _optional_text(entry.get("tool_call_id"), f"{where}: tool_call_id"),
        "metadata": metadata,
    }
    return validate_model(Message, data)


def _content(value: Any, where: str) -> tuple[str, list[dict[str, Any]], list[int]]:
    if value is None:
        return "", [], []
    if isinstance(value, str):
        return value, [], []
    if not isinstance(value, list):
        kind = type(value).__name__
        raise InvalidArgument(f"{where}: content is a {kind}; expected a string, null or parts")
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for number, item in enumerate(value):
        if isinstance(item, str):
            texts.append(item)
        elif not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise InvalidArgument(f"{where}: content part {number} has no 'type'")
        elif item["type"] == "text" and isinstance(item.get("text"), str):
            texts.append(item["text"])
        else:
            parts.append(_part(item))
    return "".join(texts), parts, [len(text) for text in texts]


def _part(item: dict[str, Any]) -> dict[str, Any]:
    part_type: str = item["type"]
    inner = item.get(part_type)
    if part_type == "image_url":
        image = inner if isinstance(inner, dict) else {"url": inner}
        return {"type": "image", **image}
    if part_type == "file" and isinstance(inner, dict):
        return {"type": "file", **inner}
    value = inner if part_type in item else {k: v for k, v in item.items() if k != "type"}
    return {"type": "custom", "name": part_type, "value": value}


def _tool_calls(value: Any, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidArgument(f"{where}: tool_calls is a {type(value).__name__}, not a list")
    return [_tool_call(raw, f"{where}, tool call {number}") for number, raw in enumerate(value)]


def _tool_call(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InvalidArgument(f"{where} is a {type(raw).__name__}, not a JSON object")
    call_type = raw.get("type") or "function"
    body = raw.get(call_type)
    if not isinstance(body, dict):
        raise InvalidArgument(f"{where} has no {call_type!r} object with the call")
    arguments = body.get("arguments", body.get("input", ""))
    if not isinstance(arguments, str):
        # Some recorders store parsed arguments; keep them as JSON text.
        arguments = json.dumps(arguments, ensure_ascii=False)
    call: dict[str, Any] = {
        "agui_id": _optional_text(raw.get("id"), f"{where}: id"),
        "name": _optional_text(body.get("name"), f"{where}: name") or "",
        "arguments": arguments,
    }
    if call_type != "function":
        call["type"] = call_type
    return call


def _optional_text(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidArgument(f"{where} is a {type(value).__name__}, not a string")
