"""Reading one AG-UI recording file for the import: its outline first, a run's events later.

The import reads every file twice, so that memory holds one run at a time, not the input:

1. :func:`outline_file` reads a file once and keeps only its outline: the digest of its
   text, where each run's events are (a :class:`Span`: byte offsets, or item positions),
   the ids of each run's first ``RUN_STARTED``, and for a request file the request's ids
   (the request is checked, then dropped). Items are decoded as JSON; only the run
   lifecycle events (``RUN_STARTED``/``RUN_FINISHED``/``RUN_ERROR``) are parsed, which is
   all the split into runs needs. A malformed file is found here, before anything is
   written.
2. :meth:`SpanReader.events` reads one run's span again and parses its events in full
   (``agui._wire.parse_event``); items that do not parse as events are skipped with one
   warning per run.

A JSON Lines file is streamed a line at a time (a line of any size; only that line is
held), in both passes. A file that is one JSON document (an array, a pretty-printed object,
an object of named streams) or server-sent events is read a file at a time (its items are
held while it is read); the second pass keeps the last such file read, so the runs of one
file cost one read. Record big inputs as JSON Lines.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ag_ui.core import BaseEvent, RunErrorEvent, RunFinishedEvent, RunStartedEvent

from .._errors import InvalidArgument
from ..agui._wire import parse_event, read_event_text
from ._agui_request import RequestRef, digest, normalize_request

__all__ = ["Recording", "Segment", "Span", "SpanReader", "outline_file"]

_log = logging.getLogger("threadkeep.import")
_BOM = b"\xef\xbb\xbf"
_LIFECYCLE = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"})
_NOT_EVENT = "an AG-UI event is a JSON object with a string 'type'"


@dataclass(frozen=True, slots=True)
class Span:
    """Where one run's items are in their file.

    Attributes:
        path: The file (its name: a ``Path`` per run would weigh more than the span).
        key: The named stream of an object of streams, else ``None``.
        start: The first item: a byte offset (``streamed``) or an item position.
        end: Past the last item, in the same unit.
        index: The position of the first item in the file (warnings name it).
        line: The line of the first item (``None`` in a JSON document).
        streamed: The file is JSON Lines, read a line at a time.
        stamp: The file's size and modification time when it was outlined.
    """

    path: str
    key: str | None
    start: int
    end: int
    index: int
    line: int | None
    streamed: bool
    stamp: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Segment:
    """One run of a recording: its span and its first ``RUN_STARTED`` (if any)."""

    span: Span | None
    thread_id: str | None = None
    run_id: str | None = None


@dataclass(slots=True)
class Recording:
    """One recorded stream (and its request), in outline.

    Attributes:
        name: The recording's name (scopes its chat: see ``docs/cli.md``).
        segments: Its runs, in order (split as the live wrapper would see them).
        request: The checked request beside it, if any.
        digest: A hash of the files' text (a run's content identity).
    """

    name: str
    segments: list[Segment] = field(default_factory=list)
    request: RequestRef | None = None
    digest: str = ""


def _stamp(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_size, info.st_mtime_ns


@dataclass
class _Splitter:
    """Splits a file's events into runs as they come (the rule of ``_segments`` before).

    A ``RUN_STARTED`` starts a new run only when the current one has started already and
    has ended (``RUN_FINISHED``/``RUN_ERROR``) or names another run id. Events before the
    first ``RUN_STARTED`` belong to that run, and a ``RUN_STARTED`` repeated for the run in
    progress is the same run: a live ``StorageAgent`` folds both into one run.
    """

    path: Path
    key: str | None
    streamed: bool
    stamp: tuple[int, int]
    segments: list[Segment] = field(default_factory=list)
    run_id: str | None = None
    ended: bool = False
    opened: tuple[int, int, int | None] | None = None
    started: RunStartedEvent | None = None

    def add(self, event: BaseEvent | None, position: int, index: int, line: int | None) -> None:
        """Take an event (``None``: one that is not a run lifecycle event) at ``position``."""
        if isinstance(event, RunStartedEvent):
            if self.run_id is not None and (self.ended or event.run_id != self.run_id):
                self.close(position)
            self.run_id, self.ended = event.run_id, False
        elif isinstance(event, RunFinishedEvent | RunErrorEvent):
            self.ended = True
        if self.opened is None:
            self.opened = (position, index, line)
        if isinstance(event, RunStartedEvent) and self.started is None:
            self.started = event

    def close(self, end: int) -> None:
        """End the current run at ``end``."""
        if self.opened is None:
            return
        start, index, line = self.opened
        span = Span(str(self.path), self.key, start, end, index, line, self.streamed, self.stamp)
        started = self.started
        ids = (started.thread_id, started.run_id) if started is not None else (None, None)
        self.segments.append(Segment(span, *ids))
        self.opened, self.started = None, None


def _outline_event(item: Any) -> BaseEvent | str | None:
    """An item as the outline reads it.

    Returns:
        A run lifecycle event parsed, ``None`` for any other event, or the reason the item
        is not an event.
    """
    kind = item.get("type") if isinstance(item, dict) else None
    if not isinstance(kind, str):
        return _NOT_EVENT
    if kind in _LIFECYCLE:
        try:
            return parse_event(item)
        except InvalidArgument:
            return None  # skipped when its run is read (and warned about then)
    return None


@dataclass
class _Outline:
    """What :func:`outline_file` gathers about one file's items."""

    skipped: list[str] = field(default_factory=list)
    skipped_count: int = 0
    problems: list[str] = field(default_factory=list)

    def skip(self, note: str) -> None:
        self.skipped_count += 1
        if not self.skipped:
            self.skipped.append(note)


def outline_file(path: Path, *, name: str, strict: bool, pair: bool) -> list[Recording]:
    """Read one file in outline (see the module docstring).

    Args:
        path: The file.
        name: The recording's name.
        strict: The file was named directly: holding no AG-UI is an error, not a note.
        pair: It is a request or response of a pair (a run folder's ``request.json``):
            a file that is not UTF-8 text is an error naming it, not a note.

    Returns:
        The file's recordings (``[]`` for a file that is not AG-UI, after a note).

    Raises:
        InvalidArgument: If the file cannot be read, is an AG-UI file that is malformed
            (a line that is not JSON: the message names the file and line; a request that
            is not a ``RunAgentInput``), or (``strict``) holds no AG-UI events or request.
    """
    try:
        stamp = _stamp(path)
        streamed = _is_json_lines(path)
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc}") from exc
    if streamed:
        found = _stream_outline(path, name, stamp, strict=strict, pair=pair)
        if found is not None:
            return found
    return _whole_outline(path, name, stamp, strict=strict, pair=pair)


def _is_json_lines(path: Path) -> bool:
    """Whether the file's first non-blank line is a JSON object on its own."""
    with path.open("rb") as file:
        for number, raw in enumerate(file):
            line = raw.removeprefix(_BOM) if number == 0 else raw
            if not line.strip():
                continue
            if not line.lstrip().startswith(b"{"):
                return False
            try:
                return isinstance(json.loads(line.decode("utf-8")), dict)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                return False
    return False


def _stream_outline(
    path: Path, name: str, stamp: tuple[int, int], *, strict: bool, pair: bool
) -> list[Recording] | None:
    """The outline of a JSON Lines file read a line at a time; ``None``: read it whole."""
    hasher = hashlib.sha256()
    splitter = _Splitter(path, None, True, stamp)
    notes = _Outline()
    items = 0
    offset = 0
    first_is_document = False
    with path.open("rb") as file:
        for number, read in enumerate(file, start=1):
            start = offset
            offset += len(read)
            raw = read
            if number == 1 and read.startswith(_BOM):
                raw, start = read[len(_BOM) :], len(_BOM)
            hasher.update(raw)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if splitter.opened is not None or splitter.segments or strict or pair:
                    msg = f"{path}: line {number} is not UTF-8 text (byte {exc.start})"
                    raise InvalidArgument(msg) from exc
                _log.warning("skipped %s: not an AG-UI file (not UTF-8 text)", path)
                return []
            if not text.strip():
                continue
            try:
                item = json.loads(text)
            except json.JSONDecodeError as exc:
                notes.problems.append(f"line {number}: not JSON ({exc.msg})")
                continue
            except RecursionError:
                notes.problems.append(f"line {number}: not JSON (nested too deep)")
                continue
            if items == 0:
                first_is_document = isinstance(item, dict) and "type" not in item
            outlined = _outline_event(item)
            if isinstance(outlined, str):
                notes.skip(f"event {items} (line {number}): {outlined}")
            else:
                splitter.add(outlined, start, items, number)
            items += 1
    splitter.close(offset)
    if items == 1 and first_is_document:
        return None  # one object without a type: a request or named streams, read whole
    text_digest = hasher.hexdigest()[:16]
    found = [Recording(name, splitter.segments, digest=text_digest)] if splitter.segments else []
    return _finish(path, found, notes, strict=strict, sse=False)


def _finish(
    path: Path, found: list[Recording], notes: _Outline, *, strict: bool, sse: bool
) -> list[Recording]:
    """Refuse a malformed file, note a file that is not AG-UI, warn about skipped items."""
    skipped = notes.skipped
    count = notes.skipped_count
    if found and notes.problems:
        if not sse:
            msg = f"{path}: {notes.problems[0]}; the file is not valid JSON Lines"
            raise InvalidArgument(msg)
        skipped = notes.problems[:1] + skipped  # SSE blocks that do not decode: warned below
        count += len(notes.problems)
    if not found:
        if notes.problems:  # named first, as they come first in the file's reading
            skipped = notes.problems[:1]
        count += len(notes.problems)
        noun = "item" if count == 1 else "items"
        reason = f" ({count} {noun}, first: {skipped[0]})" if skipped else " (empty)"
        if strict:
            summary = f"{count} item{'s' if count != 1 else ''} skipped"
            msg = f"{path} holds no AG-UI events or RunAgentInput request"
            first = f": {summary} as not AG-UI events (first: {skipped[0]})" if skipped else ""
            raise InvalidArgument(msg + (f"{first}; is --format right?" if first else ""))
        _log.warning("skipped %s: not an AG-UI file%s", path, reason)
        return []
    if count:
        shown = f"{count} item{'s' if count > 1 else ''}"
        _log.warning("%s: %s skipped as not AG-UI events (first: %s)", path, shown, skipped[0])
    return found


def _whole_outline(
    path: Path, name: str, stamp: tuple[int, int], *, strict: bool, pair: bool
) -> list[Recording]:
    """The outline of a file read whole (a JSON document, SSE, or anything else)."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        if strict or pair:
            msg = f"{path} is not UTF-8 text (byte {exc.start}); it is not an AG-UI file"
            raise InvalidArgument(msg) from exc
        _log.warning("skipped %s: not an AG-UI file (not UTF-8 text)", path)
        return []
    parsed = read_event_text(text) if text.strip() else None
    notes = _Outline(problems=list(parsed.problems) if parsed else [])
    items = parsed.items if parsed else []
    lines = parsed.lines if parsed else []
    text_digest = digest(text)
    found: list[Recording] = []
    if len(items) == 1 and isinstance(items[0], dict) and "type" not in items[0]:
        document = items[0]
        if isinstance(document.get("messages"), list):
            request = normalize_request(document, where=str(path))
            ref = RequestRef(str(path), request.thread_id, request.run_id)
            found = [Recording(name, request=ref, digest=text_digest)]
            return _finish(path, found, notes, strict=strict, sse=bool(parsed and parsed.sse))
        if document and all(isinstance(v, list) for v in document.values()):
            for key, value in document.items():
                splitter = _Splitter(path, key, False, stamp)
                _outline_items(value, [None] * len(value), splitter, notes, f"{key}: ")
                recording = Recording(f"{path.name}#{key}", digest=digest(text_digest, key))
                recording.segments = splitter.segments
                found += [recording] if recording.segments else []
            return _finish(path, found, notes, strict=strict, sse=bool(parsed and parsed.sse))
    splitter = _Splitter(path, None, False, stamp)
    _outline_items(items, lines, splitter, notes)
    if splitter.segments:
        found = [Recording(name, splitter.segments, digest=text_digest)]
    return _finish(path, found, notes, strict=strict, sse=bool(parsed and parsed.sse))


def _outline_items(
    items: list[Any],
    lines: list[int | None],
    splitter: _Splitter,
    notes: _Outline,
    prefix: str = "",
) -> None:
    for index, item in enumerate(items):
        line = lines[index] if index < len(lines) else None
        outlined = _outline_event(item)
        if isinstance(outlined, str):
            where = f" (line {line})" if line is not None else ""
            notes.skip(f"{prefix}event {index}{where}: {outlined}")
        else:
            splitter.add(outlined, index, index, line)
    splitter.close(len(items))


class SpanReader:
    """Reads runs' events again, in full (pass 2); keeps the last file read whole."""

    def __init__(self) -> None:
        self._document: tuple[str, list[Any] | dict[str, Any]] | None = None
        self._lines: list[int | None] = []

    def events(self, span: Span) -> list[BaseEvent]:
        """The events of one run, parsed; items that are not events are skipped (warned).

        Raises:
            InvalidArgument: If the file changed since it was outlined.
        """
        try:
            changed = _stamp(Path(span.path)) != span.stamp
        except OSError:
            changed = True
        if changed:
            msg = f"{span.path} changed during the import; import it again"
            raise InvalidArgument(msg)
        skipped: list[str] = []
        events: list[BaseEvent] = []
        items = self._streamed(span) if span.streamed else self._items(span)
        for index, line, item in items:
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                continue  # noted when the file was outlined
            try:
                events.append(parse_event(item))
            except InvalidArgument as exc:
                where = f" (line {line})" if line is not None else ""
                prefix = f"{span.key}: " if span.key is not None else ""
                skipped.append(f"{prefix}event {index}{where}: {exc}")
        if skipped:
            count = f"{len(skipped)} item{'s' if len(skipped) > 1 else ''}"
            _log.warning(
                "%s: %s skipped as not AG-UI events (first: %s)", span.path, count, skipped[0]
            )
        return events

    def _streamed(self, span: Span) -> list[tuple[int, int | None, Any]]:
        found: list[tuple[int, int | None, Any]] = []
        index, line = span.index, span.line or 1
        with open(span.path, "rb") as file:
            file.seek(span.start)
            position = span.start
            while position < span.end:
                raw = file.readline()
                if not raw:
                    break
                position += len(raw)
                text = raw.decode("utf-8")
                if text.strip():
                    found.append((index, line, json.loads(text)))
                    index += 1
                line += 1
        return found

    def _items(self, span: Span) -> list[tuple[int, int | None, Any]]:
        held = self._document
        if held is None or held[0] != span.path:
            text = Path(span.path).read_bytes().decode("utf-8-sig")
            parsed = read_event_text(text)
            document: list[Any] | dict[str, Any] = parsed.items
            if span.key is not None:
                document = parsed.items[0]
            self._document = held = (span.path, document)
            self._lines = parsed.lines
        document = held[1]
        items = document if isinstance(document, list) else document[span.key or ""]
        lines: list[int | None] = [None] * len(items) if span.key is not None else self._lines
        return [
            (index, lines[index] if index < len(lines) else None, items[index])
            for index in range(span.start, min(span.end, len(items)))
        ]
