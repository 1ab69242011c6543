"""``--format auto``: tell each file's format from its first record, then import it.

Detection reads the first non-blank line (the whole document when that line is not JSON on
its own, as in pretty-printed JSON), and decides by shape, first match wins:

==============  ================================================================
format          what the first record looks like
==============  ================================================================
claude-code     an object with a Claude Code line ``type`` (``user``,
                ``assistant``, ``system``, ``summary``, ``progress``,
                ``file-history-snapshot``...) and ``sessionId``/``uuid``/``leafUuid``
openhands       an event (``id`` with ``action`` or ``observation``), or a record
                holding events under ``history``/``events``
swe-agent       a ``.traj`` file, or an object with ``trajectory`` or a
                ``history`` of role messages
agui            ``data:`` server-sent events, an AG-UI event (upper-case
                ``type`` such as ``RUN_STARTED``), a ``RunAgentInput`` request
                (``threadId``, ``runId``, ``messages``), or named event arrays
openai          a record with ``messages``/``traj``/``input``/``output``, or a
                message / Responses item (``role``, ``type: message``...)
==============  ================================================================

A file: imported as its format would be with ``--format NAME``. A folder: every file in it
(recursively; a Claude Code session's ``subagents`` folder goes with its session) is
detected; when all are of one format the folder is imported as that format's importer
imports a folder (the same chat keys), otherwise file by file, each all-or-nothing, as if
each were named directly. Files that match nothing are skipped with one log line each.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from itertools import islice
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import InvalidArgument
from . import IMPORTERS, ImportReport, ProgressCallback, resolve_importer
from ._jsonl import open_error
from ._jsonstream import JsonReader, JsonStreamError
from .openhands import is_event

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["detect_format", "import_auto"]

_log = logging.getLogger("threadkeep.import")
_CLAUDE_TYPES = frozenset(
    {"user", "assistant", "system", "summary", "progress", "file-history-snapshot"}
    | {"queue-operation", "attachment", "custom-title"}
)
_CLAUDE_KEYS = ("sessionId", "uuid", "leafUuid", "messageId")
_OPENAI_ITEM_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning"})
_SSE_PREFIXES = ("data:", "event:", "id:", "retry:", ":")
_KNOWN = ", ".join(sorted(name for name in IMPORTERS if name != "auto"))


def detect_format(path: Path) -> str | None:
    """Return the format name of a file (see the module docstring), or ``None``.

    Args:
        path: A regular file.

    Raises:
        InvalidArgument: If the file cannot be read.
    """
    if path.suffix.lower() == ".traj":
        return "swe-agent"
    first = _first_line(path)
    if first is None:
        return None
    if first.lstrip().startswith(_SSE_PREFIXES):
        return "agui"
    try:
        sample = json.loads(first)
    except (json.JSONDecodeError, RecursionError):
        sample = _skeleton(path)
    return _classify(sample)


_FIRST_LINE = 1 << 20
"""The most of a first line read to tell a format: a longer one is a one-line document."""


def _first_line(path: Path) -> str | None:
    """The first non-blank line, or its first :data:`_FIRST_LINE` bytes."""
    try:
        with path.open("rb") as handle:
            number = 0
            while raw := handle.readline(_FIRST_LINE):
                line = raw.removeprefix(b"\xef\xbb\xbf") if number == 0 else raw
                number += 1
                text = line.decode("utf-8", "replace")
                if text.strip():
                    return text
    except OSError as exc:
        raise open_error(path, exc) from exc
    return None


def _skeleton(path: Path) -> Any:
    """The document with each array cut to its first item: all the rules look at.

    Read an item at a time (``_jsonstream``), so a one-line array of any size costs its
    first item, and an object its values but the items after each array's first.
    ``None`` when the file is not one JSON document.
    """
    try:
        with path.open("rb") as handle:
            reader = JsonReader(handle)
            head = reader.peek()
            if head == "[":
                return [item.value for item in islice(reader.array_items(), 1)]
            if head != "{":
                return reader.value().value if head else None
            skeleton: dict[str, Any] = {}
            for key in reader.object_keys():
                if reader.peek() == "[":
                    items = reader.array_items()
                    skeleton[key] = [item.value for item in islice(items, 1)]
                    for _ in items:  # the rest of the array, read and dropped
                        pass
                else:
                    skeleton[key] = reader.value().value
            return skeleton
    except JsonStreamError:
        return None
    except OSError as exc:
        raise open_error(path, exc) from exc


def _classify(sample: Any) -> str | None:
    if isinstance(sample, list):
        return _classify_item(sample[0]) if sample else None
    if not isinstance(sample, dict):
        return None
    return _classify_item(sample)


_Rule = Callable[[dict[str, Any]], bool]


def _claude(v: dict[str, Any]) -> bool:
    return v.get("type") in _CLAUDE_TYPES and any(key in v for key in _CLAUDE_KEYS)


def _openhands(v: dict[str, Any]) -> bool:
    firsts = [_first(_first(v.get(key))) for key in ("history", "events")]
    return is_event(v) or any(is_event(first) for first in firsts)


def _first(value: Any) -> Any:
    """The first item of a non-empty list (an ``[action, observation]`` pair's too), else it."""
    return value[0] if isinstance(value, list) and value else value


def _swe_agent(v: dict[str, Any]) -> bool:
    history = v.get("history")
    first = history[0] if isinstance(history, list) and history else None
    return isinstance(v.get("trajectory"), list) or (isinstance(first, dict) and "role" in first)


def _agui(v: dict[str, Any]) -> bool:
    kind = v.get("type")
    if isinstance(kind, str) and kind.isupper() and kind.replace("_", "").isalpha():
        return True
    request = ("threadId" in v or "thread_id" in v) and ("runId" in v or "run_id" in v)
    named = bool(v) and all(isinstance(x, list) and x and _is_agui_event(x[0]) for x in v.values())
    return request or named


def _is_agui_event(value: Any) -> bool:
    return (
        isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"].isupper()
    )


def _openai(v: dict[str, Any]) -> bool:
    lists = ("messages", "traj", "input", "output")
    return (
        any(isinstance(v.get(k), list) for k in lists)
        or "role" in v
        or v.get("type") in _OPENAI_ITEM_TYPES
    )


_RULES: tuple[tuple[str, _Rule], ...] = (
    ("claude-code", _claude),
    ("openhands", _openhands),
    ("swe-agent", _swe_agent),
    ("agui", _agui),
    ("openai", _openai),
)


def _classify_item(item: Any) -> str | None:
    if isinstance(item, list):
        return "openai" if item and isinstance(item[0], dict) and _openai(item[0]) else None
    if not isinstance(item, dict):
        return None
    return next((name for name, rule in _RULES if rule(item)), None)


async def import_auto(
    store: Store,
    path: str | PathLike[str],
    *,
    user_id: str,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Detect the format of a file, or of each file of a folder, and import it.

    Args:
        store: An open store.
        path: A file or a folder (see the module docstring).
        user_id: Owner of the imported chats.
        progress: Passed to the importer when one importer takes the whole path; for a
            folder of mixed formats, called as ``progress(done, files)``.

    Returns:
        The merged counts of every importer run.

    Raises:
        InvalidArgument: If a file named directly matches no format, or a folder holds
            no file of a known format (the message lists the known formats), or the
            format's importer refuses the input (its own message).
        ThreadkeepError: Whatever the importer raises.
    """
    root = Path(path)
    detected = _plan(root)
    if len(detected) == 1 and detected[0][0] == root:
        _, name = detected[0]
        return await resolve_importer(name)(store, root, user_id=user_id, progress=progress)
    report = ImportReport()
    if progress is not None:
        progress(0, len(detected))
    for done, (file, name) in enumerate(detected, start=1):
        report.merge(await resolve_importer(name)(store, file, user_id=user_id))
        if progress is not None:
            progress(done, len(detected))
    return report


def _plan(root: Path) -> list[tuple[Path, str]]:
    """What to import: ``[(root, format)]`` when one importer takes it all, else each file."""
    if root.is_file():
        name = detect_format(root)
        if name is None:
            msg = (
                f"{root}: cannot tell its format from its content; name it with --format ({_KNOWN})"
            )
            raise InvalidArgument(msg)
        return [(root, name)]
    if not root.is_dir():
        raise InvalidArgument(f"{root}: no such file or directory")
    detected = _detect_folder(root)
    formats = {name for _, name in detected}
    return [(root, formats.pop())] if len(formats) == 1 else detected


def _detect_folder(root: Path) -> list[tuple[Path, str]]:
    detected: list[tuple[Path, str]] = []
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        if _is_subagent_file(file):
            continue
        name = detect_format(file)
        if name is None:
            _log.warning("%s: not a known transcript format; skipped", file.relative_to(root))
        else:
            detected.append((file, name))
    if not detected:
        raise InvalidArgument(f"{root} holds no file of a known format ({_KNOWN})")
    return detected


def _is_subagent_file(file: Path) -> bool:
    """A Claude Code ``<session>/subagents/agent-*.jsonl`` file: read with its session."""
    folder = file.parent
    return folder.name == "subagents" and folder.parent.with_suffix(".jsonl").is_file()
