"""Reading AG-UI recordings for ``threadkeep import --format agui``: files, pairs, runs.

Layouts (see ``docs/cli.md``):

- a folder per run: ``request.json`` (the ``RunAgentInput``) beside ``response.jsonl`` (the
  events; any ``response.*``), plus files that are not AG-UI at all
  (``metadata.json``, ``summary.json``...), which are skipped with a one-line note each. The
  recording's name is its folder's path under the imported directory;
- turn files paired by name (``X#Turn_01.02.Request.Client...json`` with
  ``X#Turn_01.06.Response.Server...json``); the recording's name is the file name up to ``#``;
- loose stream files (a JSON array, JSON Lines, ``data:`` SSE, or an object of named streams).

A malformed AG-UI file (a JSON Lines file of events with a line that is not JSON, a request
that is not a ``RunAgentInput``) refuses the whole import, before anything is written,
naming the file and line (the fields, for a request). Items among events that are not
events (no ``type``, a required field missing even after the dialect rules) and SSE
``data:`` blocks that are not JSON (keep-alives) are skipped, counted in one warning per
file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from pydantic import ValidationError

from .._errors import InvalidArgument
from ..agui._wire import parse_event, read_event_text

__all__ = [
    "Recording",
    "RunRecord",
    "digest",
    "normalize_request",
    "read_recordings",
    "runs_of",
    "scan_recordings",
]

_log = logging.getLogger("threadkeep.import")
_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson", ".sse", ".txt", ".events"})
_PAIRED = re.compile(r"^(?P<stem>.+?)(?:\.\d+)?\.(?P<kind>Request|Response)\.")
_FOLDER_KINDS = {"request": "Request", "response": "Response"}
_FOLDER = "\0folder"


@dataclass
class Recording:
    """One recorded stream (and its request): its events, where it came from, its digest.

    Attributes:
        name: The recording's name (scopes its chat: see ``docs/cli.md``).
        events: The stream's events, in order.
        request: The normalized request beside it, if any.
        digest: A hash of the files' text (a run's content identity).
    """

    name: str
    events: list[BaseEvent] = field(default_factory=list)
    request: RunAgentInput | None = None
    digest: str = ""


@dataclass
class RunRecord:
    """One run to import: a segment of a recording (from one ``RUN_STARTED`` to the next)."""

    recording: Recording
    thread_id: str
    run_id: str
    events: list[BaseEvent]
    request: RunAgentInput | None
    digest: str


def digest(*parts: str) -> str:
    """Return a short hex SHA-256 of the parts (joined with NUL)."""
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def read_recordings(path: Path) -> list[Recording]:
    """Read every recording under ``path`` (a file, its pair, or a directory).

    Raises:
        InvalidArgument: If ``path`` does not exist; a file named directly holds no AG-UI
            events or request; a directory holds none; an AG-UI file is malformed.
    """
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
        if not files:
            kinds = ", ".join(sorted(_SUFFIXES))
            raise InvalidArgument(f"{path} holds no stream files ({kinds})")
        found = _paired(path, [(f, _read(f, root=path, strict=False)) for f in files])
        if not found:
            msg = f"no file in {path} holds AG-UI events or a request ({len(files)} read)"
            raise InvalidArgument(msg)
        return found
    if not path.is_file():
        raise InvalidArgument(f"{path}: no such file or directory")
    root = path.parent.parent
    files = [path, *_siblings(path)]
    return _paired(root, [(f, _read(f, root=root, strict=f == path)) for f in files])


def _pair_of(path: Path) -> tuple[tuple[Path, str], str] | None:
    """Return ``(pairing key, "Request" | "Response")`` of a file that has a partner."""
    match = _PAIRED.match(path.name)
    if match is not None:
        return (path.parent, match["stem"]), match["kind"]
    kind = _FOLDER_KINDS.get(path.stem.lower())
    return ((path.parent, _FOLDER), kind) if kind else None


def _siblings(path: Path) -> list[Path]:
    mine = _pair_of(path)
    if mine is None:
        return []
    return sorted(
        p
        for p in path.parent.iterdir()
        if p != path
        and p.is_file()
        and (other := _pair_of(p)) is not None
        and other[0] == mine[0]
        and other[1] != mine[1]
    )


def _name(path: Path, root: Path) -> str:
    pair = _pair_of(path)
    if pair is not None and pair[0][1] == _FOLDER:
        try:
            relative = path.parent.relative_to(root).as_posix()
        except ValueError:
            relative = path.parent.name
        return relative if relative not in ("", ".") else path.parent.name or "recording"
    return path.name.split("#", 1)[0]


def _read(path: Path, *, root: Path, strict: bool) -> list[Recording]:
    """Read one file (see the module docstring); a non-AG-UI file gives ``[]`` and a note."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {path}: {exc}") from exc
    parsed = read_event_text(text) if text.strip() else None
    skipped: list[str] = []
    items = parsed.items if parsed else []
    lines = parsed.lines if parsed else []
    found = _classify(path, root, items, lines=lines, skipped=skipped, text_digest=digest(text))
    if found and parsed and parsed.problems:
        if not parsed.sse:
            msg = f"{path}: {parsed.problems[0]}; the file is not valid JSON Lines"
            raise InvalidArgument(msg)
        skipped = [*parsed.problems, *skipped]  # SSE blocks that do not decode: warned below
    if not found:
        skipped = [*(parsed.problems if parsed else []), *skipped]
        noun = "item" if len(skipped) == 1 else "items"
        reason = f" ({len(skipped)} {noun}, first: {skipped[0]})" if skipped else " (empty)"
        if strict:
            summary = f"{len(skipped)} item{'s' if len(skipped) != 1 else ''} skipped"
            msg = f"{path} holds no AG-UI events or RunAgentInput request"
            first = f": {summary} as not AG-UI events (first: {skipped[0]})" if skipped else ""
            raise InvalidArgument(msg + (f"{first}; is --format right?" if first else ""))
        _log.warning("skipped %s: not an AG-UI file%s", path, reason)
        return []
    if skipped:
        count = f"{len(skipped)} item{'s' if len(skipped) > 1 else ''}"
        _log.warning("%s: %s skipped as not AG-UI events (first: %s)", path, count, skipped[0])
    return found


def _classify(
    path: Path,
    root: Path,
    items: list[Any],
    *,
    lines: list[int | None],
    skipped: list[str],
    text_digest: str,
) -> list[Recording]:
    name = _name(path, root)
    if len(items) == 1 and isinstance(items[0], dict) and "type" not in items[0]:
        document = items[0]
        if isinstance(document.get("messages"), list):
            request = normalize_request(document, where=str(path))
            return [Recording(name, request=request, digest=text_digest)]
        if document and all(isinstance(v, list) for v in document.values()):
            return [
                Recording(
                    f"{path.name}#{key}",
                    _events(path, value, [None] * len(value), skipped, f"{key}: "),
                    digest=digest(text_digest, key),
                )
                for key, value in document.items()
            ]
    events = _events(path, items, lines, skipped)
    return [Recording(name, events, digest=text_digest)] if events else []


def _events(
    path: Path, items: list[Any], lines: list[int | None], skipped: list[str], prefix: str = ""
) -> list[BaseEvent]:
    """Parse the items; those that are not events are skipped (noted in ``skipped``)."""
    events: list[BaseEvent] = []
    for index, item in enumerate(items):
        line = lines[index] if index < len(lines) else None
        where = f" (line {line})" if line is not None else ""
        try:
            events.append(_PARSER.get()(item))
        except InvalidArgument as exc:
            skipped.append(f"{prefix}event {index}{where}: {exc}")
    return events


_PARSER: ContextVar[Callable[[Any], BaseEvent]] = ContextVar("tk_agui_parser", default=parse_event)
_LIFECYCLE = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"})
_PLACEHOLDER = BaseEvent.model_construct(type=EventType.RAW)


def _outline_event(item: Any) -> BaseEvent:
    """An event as :func:`scan_recordings` reads it: run lifecycle events parsed, others not.

    Raises:
        InvalidArgument: If ``item`` is not an object with a string ``type``.
    """
    kind = item.get("type") if isinstance(item, dict) else None
    if not isinstance(kind, str):
        raise InvalidArgument("not an event")
    if kind.upper() in _LIFECYCLE:
        return parse_event(item)
    return _PLACEHOLDER  # never folded: the outline only splits recordings into runs


def scan_recordings(path: Path) -> list[Recording] | None:
    """:func:`read_recordings` without parsing events other than the runs' starts and ends.

    Enough to split recordings into runs (their thread and run ids, digests), for a check
    that they are stored already: an unchanged recording gives the digests of the full
    reading (they hash the files' text), and any other difference only makes the check
    fail. Nothing is logged; ``None`` when the full reading would refuse the input.
    """
    token = _PARSER.set(_outline_event)
    _log.addFilter(_silent)
    try:
        return read_recordings(path)
    except InvalidArgument:
        return None
    finally:
        _log.removeFilter(_silent)
        _PARSER.reset(token)


def _silent(record: logging.LogRecord) -> bool:
    return False


def _paired(root: Path, read: list[tuple[Path, list[Recording]]]) -> list[Recording]:
    """Attach each request to the response stream beside it (same folder or name stem)."""
    requests: dict[tuple[Path, str], Recording] = {}
    for path, found in read:
        pair = _pair_of(path)
        for recording in found:
            if recording.request is not None and pair is not None:
                requests[pair[0]] = recording
    result: list[Recording] = []
    used: set[tuple[Path, str]] = set()
    for path, found in read:
        pair = _pair_of(path)
        key = pair[0] if pair else None
        for recording in found:
            if recording.request is None:
                if key is not None and key in requests:
                    request = requests[key]
                    recording.request = request.request
                    recording.digest = digest(request.digest, recording.digest)
                    used.add(key)
                result.append(recording)
            elif key is None:
                result.append(recording)
    # A request whose response is missing is still history worth importing.
    result += [r for key, r in requests.items() if key not in used]
    return result


def runs_of(recordings: list[Recording]) -> list[RunRecord]:
    """Split each recording into runs at each ``RUN_STARTED`` (its request goes to the first)."""
    runs: list[RunRecord] = []
    for recording in recordings:
        request = recording.request
        segments = _segments(recording.events) or [[]]
        for index, events in enumerate(segments):
            started = next((e for e in events if isinstance(e, RunStartedEvent)), None)
            first = request if index == 0 else None
            # A RUN_STARTED naming no thread or run (``""``) leaves them to the request.
            thread = (
                (started.thread_id if started else None)
                or (first.thread_id if first else None)
                or "thread"
            )
            run_id = (started.run_id if started else None) or (first.run_id if first else None)
            runs.append(
                RunRecord(
                    recording=recording,
                    thread_id=thread,
                    run_id=run_id or f"import:{digest(recording.name, str(index))}",
                    events=events,
                    request=first,
                    digest=digest(recording.digest, str(index)),
                )
            )
    return runs


def _segments(events: list[BaseEvent]) -> list[list[BaseEvent]]:
    """Split a recording's events into runs, as the live wrapper would have seen them.

    A ``RUN_STARTED`` starts a new run only when the current one has started already and
    has ended (``RUN_FINISHED``/``RUN_ERROR``) or names another run id. Events before the
    first ``RUN_STARTED`` (a ``CUSTOM`` or ``STATE_SNAPSHOT`` some recorders write first)
    belong to that run, and a ``RUN_STARTED`` repeated for the run in progress is the
    same run: a live ``StorageAgent`` folds both into one run.
    """
    segments: list[list[BaseEvent]] = []
    run_id: str | None = None
    ended = False
    for event in events:
        if isinstance(event, RunStartedEvent):
            if run_id is not None and (ended or event.run_id != run_id):
                segments.append([])
            run_id, ended = event.run_id, False
        elif isinstance(event, RunFinishedEvent | RunErrorEvent):
            ended = True
        if not segments:
            segments.append([])
        segments[-1].append(event)
    return segments


def normalize_request(request: dict[str, Any], *, where: str = "the request") -> RunAgentInput:
    """Return a recorded request as a ``RunAgentInput``.

    Loose recorded shapes are accepted: messages without ``id`` get a deterministic one
    (``import:<position>:<hash of role and content>``) and the 0.x ``binary`` content part
    becomes an image or document part.

    Args:
        request: The decoded request object.
        where: Names the file in errors.

    Raises:
        InvalidArgument: If the request does not validate even after normalizing; the
            message names ``where`` and the fields at fault.
    """
    data = dict(request)
    data.setdefault("threadId", data.get("thread_id", "thread"))
    data.setdefault("runId", data.get("run_id", f"import:{digest(json.dumps(request))}"))
    data["messages"] = [_normalize_message(m, i) for i, m in enumerate(data.get("messages", []))]
    for name, default in (("tools", []), ("context", []), ("forwardedProps", {})):
        if name not in data and _snake(name) not in data:
            data[name] = default
    if "state" not in data:
        data["state"] = {}
    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as exc:
        fields = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors()[:3]
        )
        msg = f"{where}: the recorded request is not a RunAgentInput ({fields})"
        raise InvalidArgument(msg) from exc


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _normalize_message(message: Any, position: int) -> Any:
    if not isinstance(message, dict):
        return message
    data = dict(message)
    if isinstance(data.get("content"), list):
        data["content"] = [_normalize_part(p) for p in data["content"]]
    if not data.get("id"):
        shape = json.dumps([data.get("role"), data.get("content"), data.get("toolCalls")])
        data["id"] = f"import:{position}:{digest(shape)}"
    return data


def _normalize_part(part: Any) -> Any:
    if not isinstance(part, dict) or part.get("type") != "binary":
        return part
    mime = part.get("mimeType") or part.get("mime_type") or ""
    if part.get("data") is not None:
        source = {"type": "data", "value": part["data"], "mimeType": mime}
    else:
        source = {"type": "url", "value": part.get("url") or part.get("id") or ""}
        source |= {"mimeType": mime} if mime else {}
    image = isinstance(mime, str) and mime.startswith("image/")  # else validation refuses it
    return {"type": "image" if image else "document", "source": source}
