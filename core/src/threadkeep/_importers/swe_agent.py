"""SWE-agent trajectories become chats (``threadkeep import PATH --format swe-agent``).

Input: a ``.traj`` file (one JSON object), or a folder searched recursively for them (the
``trajectories/<run>/<instance>/<instance>.traj`` layout). Each file is one chat:

- ``history`` (the messages the model saw, SWE-agent 1.x): every entry is one message.
  ``role`` and ``content`` (a string, or text parts, whose lengths are kept when there are
  several) map as in chat completions; an assistant's ``tool_calls`` (function calling)
  become nested tool calls with their exact argument strings; a tool entry's
  ``tool_call_ids`` link it to its call (the first id is ``tool_call_ref``; all are kept
  when there are several). ``thought``, ``action``, ``agent``, ``message_type``,
  ``is_demo`` and any other field are kept in ``metadata["swe_agent"]``.
- older trajectories without tool calls read the same way (the ``action`` stays in
  metadata); a file without ``history`` is read from ``trajectory``: per step an assistant
  message (``response``; ``thought``, ``action``, ``state`` in metadata) and the
  ``observation`` as a user message, as SWE-agent showed it to the model.

Keys (importing again changes nothing): the chat is ``swe-agent:<label>`` (the file name,
or its path inside the folder given) and message ``n`` has ``agui_id`` ``swe-agent:<n>``.
``info`` (exit status, model stats, the submitted patch) is kept in the chat's metadata.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import InvalidArgument
from .._models import Message
from . import ImportReport, ProgressCallback
from ._files import check_record, read_records
from ._native import Conversation, bounded_fields, check_message, import_files
from .openai import convert_message

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["import_swe_agent", "trajectory_conversation"]

_SUFFIXES = frozenset({".traj"})


async def import_swe_agent(
    store: Store,
    path: str | PathLike[str],
    *,
    user_id: str,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import SWE-agent ``.traj`` files (one file, or a folder of them) into ``store``.

    Everything is read, converted and checked before anything is written.

    Args:
        store: An open store.
        path: A ``.traj`` file or a folder holding them (searched recursively).
        user_id: Owner of the imported chats.
        progress: Called as ``progress(0, files)`` once everything is checked, then as
            ``progress(done, files)`` after each chat is written.

    Returns:
        Counts of chats, messages and tool calls, created versus already present.

    Raises:
        InvalidArgument: If a file is missing, not JSON, or not a trajectory (no ``history``
            or ``trajectory`` list), or an entry does not have the expected shape; the
            message names the file and the entry. Nothing is written then.
        InvalidContent / PayloadTooLarge: If an entry holds what no store can keep.
        IdempotencyConflict: If a chat was imported before with other content.
    """
    return await import_files(
        store,
        path,
        user_id=user_id,
        progress=progress,
        suffixes=_SUFFIXES,
        convert=_file_conversations,
    )


def _file_conversations(file: Path, label: str, max_message_bytes: int) -> list[Conversation]:
    records, _ = read_records(file)
    if len(records) != 1:
        raise InvalidArgument(f"{label} holds {len(records)} records; a .traj file is one")
    return [trajectory_conversation(records[0], label, max_message_bytes)]


def trajectory_conversation(record: Any, label: str, max_message_bytes: int) -> Conversation:
    """Convert one trajectory object to a conversation (see the module docstring).

    Args:
        record: The parsed ``.traj`` object.
        label: Its file name or path in the folder imported (the chat key and messages).
        max_message_bytes: The store's payload limit; a larger message is refused.

    Raises:
        InvalidArgument: If the object is not a trajectory or an entry is malformed.
    """
    check_record(record, label)
    if not isinstance(record, dict):
        raise InvalidArgument(f"{label} is a {type(record).__name__}, not a trajectory object")
    history = record.get("history")
    if isinstance(history, list):
        messages = [
            _history_message(entry, n, f"{label}: history[{n}]") for n, entry in enumerate(history)
        ]
    elif isinstance(record.get("trajectory"), list):
        messages = _steps(record["trajectory"], label)
    else:
        raise InvalidArgument(f"{label} has no 'history' or 'trajectory' list; is it a .traj file?")
    for number, message in enumerate(messages):
        check_message(message, f"{label}: message {number}", max_message_bytes)
    info = record.get("info")
    details = bounded_fields(info) if isinstance(info, dict) else {}
    return Conversation(
        thread_id=f"swe-agent:{label}",
        name=label,
        metadata={"source": {"format": "swe-agent", "file": label}, "swe_agent": details},
        messages=messages,
        where=label,
    )


def _history_message(entry: Any, position: int, where: str) -> Message:
    """One ``history`` entry: a chat-completions message with SWE-agent's own fields."""
    if not isinstance(entry, dict):
        raise InvalidArgument(f"{where} is a {type(entry).__name__}, not a JSON object")
    ids = entry.get("tool_call_ids")
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
        raise InvalidArgument(f"{where}: tool_call_ids is not a list of strings")
    chat_entry = {k: v for k, v in entry.items() if k != "tool_call_ids"}
    if ids:
        chat_entry["tool_call_id"] = ids[0]
    message = convert_message(chat_entry, position, where=where)
    extras = message.metadata.pop("openai", {})
    if ids and len(ids) > 1:
        extras["tool_call_ids"] = ids
    if extras:
        message.metadata["swe_agent"] = bounded_fields(extras)
    message.agui_id = f"swe-agent:{position}"
    return message


def _steps(steps: list[Any], label: str) -> list[Message]:
    """Messages of an old trajectory that has only ``trajectory`` steps."""
    messages: list[Message] = []
    for number, step in enumerate(steps):
        where = f"{label}: trajectory[{number}]"
        if not isinstance(step, dict):
            raise InvalidArgument(f"{where} is a {type(step).__name__}, not a JSON object")
        response, observation = step.get("response", ""), step.get("observation", "")
        if not isinstance(response, str) or not isinstance(observation, str):
            raise InvalidArgument(f"{where}: 'response' and 'observation' must be strings")
        rest = {
            k: v
            for k, v in step.items()
            if k not in {"response", "observation", "query", "messages"}
        }
        step_meta = {"step": number, **bounded_fields(rest)}
        messages.append(
            Message(
                agui_id=f"swe-agent:{2 * number}",
                role="assistant",
                content=response,
                metadata={"swe_agent": step_meta},
            )
        )
        messages.append(
            Message(
                agui_id=f"swe-agent:{2 * number + 1}",
                role="user",
                content=observation,
                metadata={"swe_agent": {"step": number, "message_type": "observation"}},
            )
        )
    return messages
