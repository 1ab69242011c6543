"""OpenHands event streams become chats (``threadkeep import PATH --format openhands``).

Input: a JSON array of events, JSON Lines of events, a record (or JSON Lines of records, as
the evaluation harness writes ``output.jsonl``) holding them under ``history`` or
``events``, or a folder searched recursively for such ``.json`` / ``.jsonl`` files. An event
is an action (``action`` + ``args``) or an observation (``observation`` + ``content`` +
``extras``, with ``cause``: the id of the action it answers). Each stream is one chat:

- ``message`` actions are user or assistant messages (by ``source``), ``system`` the system
  prompt; any other agent action (``run``, ``edit``, ``finish``...) is a tool call of an
  assistant message. Actions from one model response (``tool_call_metadata.model_response
  .id``) share that message; the call's id and name are ``tool_call_metadata``'s
  (``openhands:<event id>`` and the action name without it), its arguments the exact string
  of the model response when it holds the call, else the ``args`` (``thought`` aside) as
  JSON text. The ``thought`` is the assistant message's content.
- an observation whose ``cause`` is such an action is the tool message answering that
  call; an ``error`` observation makes the call ``errored``. Other observations (a
  ``recall`` answering a user message) are system messages.
- ``agent_state_changed`` / ``change_agent_state`` / ``null`` events carry no
  conversation: they are counted in ``metadata["openhands"]["skipped_events"]``.

Keys (importing again changes nothing): the chat is ``openhands:<label>`` (the file name, or
its path inside the folder given), ``openhands:<label>:<instance_id or record index>`` for a
file of records; message ids are ``openhands:<event id>``. In a folder, one-event files (the
file store's ``<session>/events/<id>.json``) are one stream per directory, in ``id`` order:
the chat ``openhands:<directory path inside the folder>/``.
"""

from __future__ import annotations

from collections import Counter
from os import PathLike
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from .._content import validate_model
from .._errors import InvalidArgument
from .._models import Message
from . import ImportReport, ProgressCallback
from ._files import aware_timestamp, check_record, find_files, read_records
from ._jsontext import js_stringify
from ._native import Conversation, bounded_fields, check_message, import_conversations
from ._shape import shape_checked

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["events_conversation", "import_openhands", "is_event"]

_SUFFIXES = frozenset({".json", ".jsonl"})
_SKIPPED = frozenset({"agent_state_changed", "change_agent_state", "null"})
_EVENT_LISTS = ("history", "events")


async def import_openhands(
    store: Store,
    path: str | PathLike[str],
    *,
    user_id: str,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import OpenHands event streams (a file, or a folder of them) into ``store``.

    Everything is read, converted and checked before anything is written.

    Args:
        store: An open store.
        path: A ``.json`` / ``.jsonl`` file or a folder holding them (searched
            recursively).
        user_id: Owner of the imported chats.
        progress: Called as ``progress(0, chats)`` once everything is checked, then as
            ``progress(done, chats)`` after each chat is written.

    Returns:
        Counts of chats, messages and tool calls, created versus already present.

    Raises:
        InvalidArgument: If a file is missing or not JSON, holds no event stream, or an
            event lacks what its kind needs; the message names the file and the event.
            Nothing is written then.
        InvalidContent / PayloadTooLarge: If an event holds what no store can keep.
        IdempotencyConflict: If a chat was imported before with other content.
    """
    root = Path(path)
    conversations = _conversations(root, store.max_message_bytes)
    return await import_conversations(store, user_id, conversations, root.name, progress)


def is_event(value: Any) -> bool:
    """Whether ``value`` looks like an OpenHands event (an ``id`` and an action/observation)."""
    return (
        isinstance(value, dict) and "id" in value and ("action" in value or "observation" in value)
    )


def _conversations(root: Path, max_bytes: int) -> list[Conversation]:
    """Every stream under ``root``; a folder of one-event files is one stream.

    OpenHands' file store keeps a session as ``<session>/events/<id>.json``, one event per
    file: in a folder, the one-event files of each directory are one stream, in ``id``
    order, keyed by the directory's path inside the folder.
    """
    conversations: list[Conversation] = []
    folders: dict[str, list[Any]] = {}
    for file, label in find_files(root, _SUFFIXES):
        records, lines = read_records(file)
        if root.is_dir() and len(records) == 1 and is_event(records[0]):
            check_record(records[0], label)
            parent = PurePosixPath(label).parent.as_posix()
            folders.setdefault(root.name if parent == "." else parent, []).append(records[0])
        else:
            with shape_checked(label):
                conversations += _file_conversations(records, lines, label, max_bytes)
    for folder, events in sorted(folders.items()):
        with shape_checked(f"{folder}/"):
            events.sort(key=lambda event: (not isinstance(event["id"], int), event["id"]))
            thread_id = f"openhands:{folder}/"
            conversations.append(events_conversation(events, f"{folder}/", thread_id, max_bytes))
    return conversations


def _file_conversations(
    records: list[Any], lines: list[int | None], label: str, max_bytes: int
) -> list[Conversation]:
    if len(records) == 1 and isinstance(records[0], list):
        records = records[0]
    if records and all(is_event(r) for r in records):
        return [events_conversation(records, label, f"openhands:{label}", max_bytes)]
    conversations = []
    for index, record in enumerate(records):
        line = lines[index] if index < len(lines) else None
        where = f"{label}: record {index}" + (f" (line {line})" if line is not None else "")
        events = _record_events(record, where)
        key = record.get("instance_id") if isinstance(record, dict) else None
        suffix = (
            str(key) if isinstance(key, str | int) and not isinstance(key, bool) else str(index)
        )
        conversation = events_conversation(events, where, f"openhands:{label}:{suffix}", max_bytes)
        details = {
            k: v
            for k, v in record.items()
            if k not in _EVENT_LISTS and isinstance(v, str | int | float | bool)
        }
        conversation.metadata["openhands"]["record"] = bounded_fields(details)
        conversations.append(conversation)
    return conversations


def _record_events(record: Any, where: str) -> list[Any]:
    if isinstance(record, list):
        return _flat(record)
    if isinstance(record, dict):
        for key in _EVENT_LISTS:
            if isinstance(record.get(key), list):
                return _flat(record[key])
    raise InvalidArgument(
        f"{where} is neither an OpenHands event nor a record with 'history' events"
    )


def _flat(events: list[Any]) -> list[Any]:
    """Older evaluation output keeps ``history`` as ``[action, observation]`` pairs."""
    if events and all(isinstance(item, list) for item in events):
        return [event for pair in events for event in pair]
    return events


class _Stream:
    """The messages of one stream as they are built, and the calls by action event id."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.messages: list[dict[str, Any]] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.response: tuple[str, dict[str, Any]] | None = None  # (model response id, message)
        self.skipped: Counter[str] = Counter()


def events_conversation(
    events: list[Any], where: str, thread_id: str, max_bytes: int
) -> Conversation:
    """Convert one event stream to a conversation (see the module docstring).

    Args:
        events: The events, in stream order.
        where: The file (and record), for error messages and the chat name.
        thread_id: The chat key.
        max_bytes: The store's payload limit; a larger message is refused.

    Raises:
        InvalidArgument: If an event is not an object or lacks what its kind needs.
    """
    stream = _Stream(where)
    for index, event in enumerate(events):
        event_where = f"{where}, event {index}"
        check_record(event, event_where)
        if not is_event(event):
            raise InvalidArgument(
                f"{event_where} is not an OpenHands event (no 'id' and 'action'/'observation')"
            )
        _event(stream, event, event_where)
    messages = []
    for fields in stream.messages:
        try:
            message = validate_model(Message, fields)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{where}, message {fields['agui_id']}: {exc}") from exc
        messages.append(check_message(message, f"{where}, message {fields['agui_id']}", max_bytes))
    return Conversation(
        thread_id=thread_id,
        name=where,
        metadata={
            "source": {"format": "openhands", "file": where},
            "openhands": {"skipped_events": dict(stream.skipped)},
        },
        messages=messages,
        where=where,
    )


def _event(stream: _Stream, event: dict[str, Any], where: str) -> None:
    kind = event.get("action", event.get("observation"))
    if kind in _SKIPPED:
        stream.skipped[str(kind)] += 1
        return
    if "action" in event:
        _action(stream, event, str(kind), where)
    else:
        _observation(stream, event, str(kind))


def _base(event: dict[str, Any], role: str, content: str) -> dict[str, Any]:
    keep = {
        k: v
        for k, v in event.items()
        if k not in {"args", "content", "extras", "tool_call_metadata"}
    }
    meta = event.get("tool_call_metadata")
    if isinstance(meta, dict):  # the raw model response is large; its id and usage are kept
        response = meta.get("model_response")
        trimmed = {k: v for k, v in meta.items() if k != "model_response"}
        if isinstance(response, dict):
            trimmed["model_response"] = {
                k: response[k] for k in ("id", "model", "usage") if k in response
            }
        keep["tool_call_metadata"] = trimmed
    return {
        "agui_id": f"openhands:{event['id']}",
        "role": role,
        "content": content,
        "parts": [],
        "tool_calls": [],
        "created_at": aware_timestamp(event.get("timestamp")),
        "metadata": {"openhands": bounded_fields(keep)},
    }


def _action(stream: _Stream, event: dict[str, Any], kind: str, where: str) -> None:
    args = event.get("args", {})
    if not isinstance(args, dict):
        raise InvalidArgument(f"{where}: args is a {type(args).__name__}, not an object")
    if kind in {"message", "system"}:
        stream.response = None
        role = (
            "system"
            if kind == "system"
            else ("user" if event.get("source") == "user" else "assistant")
        )
        content = args.get("content", event.get("message", ""))
        fields = _base(event, role, content if isinstance(content, str) else js_stringify(content))
        urls = args.get("image_urls") or []
        fields["parts"] = [{"type": "image", "url": url} for url in urls if isinstance(url, str)]
        rest = {k: v for k, v in args.items() if k not in {"content", "image_urls"}}
        if rest:
            fields["metadata"]["openhands"]["args"] = bounded_fields(rest)
        stream.messages.append(fields)
        return
    if event.get("source") != "agent":
        stream.response = None
        fields = _base(event, "system", str(event.get("message", "")))
        fields["metadata"]["openhands"]["args"] = bounded_fields(args)
        stream.messages.append(fields)
        return
    _tool_action(stream, event, kind, args)


def _tool_action(stream: _Stream, event: dict[str, Any], kind: str, args: dict[str, Any]) -> None:
    meta = _object(event.get("tool_call_metadata"))
    response = _object(meta.get("model_response"))
    response_id = response.get("id") if isinstance(response.get("id"), str) else None
    given = meta.get("tool_call_id")
    call_id = given if isinstance(given, str) and given else f"openhands:{event['id']}"
    thought = args.get("thought")
    thought = thought if isinstance(thought, str) else ""
    if (
        stream.response is not None
        and response_id is not None
        and stream.response[0] == response_id
    ):
        message = stream.response[1]
        if thought:
            message["content"] += ("\n" if message["content"] else "") + thought
    else:
        message = _base(event, "assistant", thought)
        stream.messages.append(message)
        stream.response = (response_id, message) if response_id is not None else None
    call: dict[str, Any] = {
        "agui_id": call_id,
        "name": meta.get("function_name") if isinstance(meta.get("function_name"), str) else kind,
        "arguments": _arguments(response, call_id, args),
        "openhands": {"event_id": event["id"], "action": kind},
    }
    message["tool_calls"].append(call)
    stream.calls[event["id"]] = call


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _arguments(response: dict[str, Any], call_id: str, args: dict[str, Any]) -> str:
    """The exact argument string of the call in the model response, else ``args`` as JSON."""
    for choice in response.get("choices") or []:
        for call in _object(_object(choice).get("message")).get("tool_calls") or []:
            function = _object(_object(call).get("function"))
            if _object(call).get("id") == call_id and isinstance(function.get("arguments"), str):
                return str(function["arguments"])
    return js_stringify({k: v for k, v in args.items() if k != "thought"})


def _observation(stream: _Stream, event: dict[str, Any], kind: str) -> None:
    stream.response = None
    content = event.get("content", "")
    if not isinstance(content, str):
        content = js_stringify(content)
    call = stream.calls.get(event["cause"]) if isinstance(event.get("cause"), int) else None
    fields = _base(event, "tool" if call is not None else "system", content)
    extras = event.get("extras")
    if isinstance(extras, dict) and extras:
        fields["metadata"]["openhands"]["extras"] = bounded_fields(extras)
    if call is not None:
        fields["tool_call_ref"] = call["agui_id"]
        if kind == "error":
            call["status"] = "errored"
    stream.messages.append(fields)
