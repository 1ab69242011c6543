"""The outline of an AG-UI recording file: its runs' spans, split as they come; JSON Lines.

The import reads every file twice, so that memory holds one run at a time, not the input
(``_agui_stream`` dispatches on the layout and reads a run's span again):

1. the outline keeps the digest of the file's text (SHA-256 of its bytes, BOM excluded,
   hashed as they stream), where each run's events are (a :class:`Span`: byte offsets),
   the ids of each run's first ``RUN_STARTED``, and for a request file the request's ids
   (the request is checked, then dropped). Items are decoded as JSON; only the run
   lifecycle events (``RUN_STARTED``/``RUN_FINISHED``/``RUN_ERROR``) are parsed, which is
   all the split into runs needs (:class:`Splitter`). A malformed file is found here,
   before anything is written (:func:`finish`).
2. the second pass reads one run's span again and parses its events in full.

This module holds the outline's types and the JSON Lines reading (:func:`lines_outline`:
a line at a time, a line of any size; only that line is held).
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
from ..agui._wire import parse_event
from ._agui_request import RequestRef

__all__ = [
    "BOM",
    "Notes",
    "Recording",
    "Segment",
    "Span",
    "Splitter",
    "finish",
    "is_json_lines",
    "lines_outline",
    "outline_event",
    "stamp_of",
]

_log = logging.getLogger("threadkeep.import")
BOM = b"\xef\xbb\xbf"
_FIRST_LINE = 1 << 20
"""How much of a file's first line :func:`is_json_lines` reads: a longer first line is a
one-line JSON document (or a JSON Lines file whose first line says so only when read as one)."""
_LIFECYCLE = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"})
_NOT_EVENT = "an AG-UI event is a JSON object with a string 'type'"


@dataclass(frozen=True, slots=True)
class Span:
    """Where one run's items are in their file.

    Attributes:
        path: The file (its name: a ``Path`` per run would weigh more than the span).
        key: The named stream of an object of streams, else ``None``.
        start: The byte offset of the first item.
        end: Past the last item, in the same unit.
        index: The position of the first item in the file (warnings name it).
        line: The line of the first item (``None`` in a JSON document).
        layout: How the file is read again: ``"lines"`` (JSON Lines, ``start``/``end``
            byte offsets), ``"json"`` (the items of a JSON document's array, byte offsets)
            or ``"sse"`` (server-sent events, the byte offsets of ``data:`` blocks).
        stamp: The file's size and modification time when it was outlined.
    """

    path: str
    key: str | None
    start: int
    end: int
    index: int
    line: int | None
    layout: str
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
        legacy: The name an import before session 25 gave it, where it differs (a loose
            file in a subfolder was named by its file name alone), else ``None``.
        segments: Its runs, in order (split as the live wrapper would see them).
        request: The checked request beside it, if any.
        digest: A hash of the files' text (a run's content identity).
    """

    name: str
    segments: list[Segment] = field(default_factory=list)
    request: RequestRef | None = None
    digest: str = ""
    legacy: str | None = None


def stamp_of(path: Path) -> tuple[int, int]:
    """The file's size and modification time (a change between the passes is refused)."""
    info = path.stat()
    return info.st_size, info.st_mtime_ns


@dataclass
class Splitter:
    """Splits a file's events into runs as they come (the rule of ``_segments`` before).

    A ``RUN_STARTED`` starts a new run only when the current one has started already and
    has ended (``RUN_FINISHED``/``RUN_ERROR``) or names another run id. Events before the
    first ``RUN_STARTED`` belong to that run, and a ``RUN_STARTED`` repeated for the run in
    progress is the same run: a live ``StorageAgent`` folds both into one run.
    """

    path: Path
    key: str | None
    layout: str
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
        span = Span(str(self.path), self.key, start, end, index, line, self.layout, self.stamp)
        started = self.started
        ids = (started.thread_id, started.run_id) if started is not None else (None, None)
        self.segments.append(Segment(span, *ids))
        self.opened, self.started = None, None


def outline_event(item: Any) -> BaseEvent | str | None:
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
class Notes:
    """What the outline of one file gathers about its items that are not events.

    Attributes:
        skipped: The first item skipped as not an event (a note, for the warning).
        skipped_count: How many were.
        problems: Items that are not JSON (``"line N: ..."``): an error in a file of
            events (a warning in SSE), see :func:`finish`.
    """

    skipped: list[str] = field(default_factory=list)
    skipped_count: int = 0
    problems: list[str] = field(default_factory=list)

    def skip(self, note: str) -> None:
        """Count an item that is not an event (``note`` says which and why)."""
        self.skipped_count += 1
        if not self.skipped:
            self.skipped.append(note)


def is_json_lines(path: Path) -> bool:
    """Whether the file's first non-blank line is a JSON object on its own.

    At most :data:`_FIRST_LINE` bytes of that line are read (a one-line document of any
    size is not read whole here).

    Raises:
        OSError: If the file cannot be read.
    """
    with path.open("rb") as file:
        number = 0
        while raw := file.readline(_FIRST_LINE):
            line = raw.removeprefix(BOM) if number == 0 else raw
            number += 1
            if not line.strip():
                continue
            if not line.lstrip().startswith(b"{") or (not raw.endswith(b"\n") and file.read(1)):
                return False
            try:
                return isinstance(json.loads(line.decode("utf-8")), dict)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                return False
    return False


def lines_outline(
    path: Path, name: str, stamp: tuple[int, int], *, strict: bool, pair: bool, documents: bool
) -> list[Recording] | None:
    """The outline of a JSON Lines file read a line at a time.

    Args:
        path: The file.
        name: The recording's name.
        stamp: :func:`stamp_of` the file.
        strict: The file was named directly (see :func:`finish`).
        pair: It is a run folder's request or response (not UTF-8: an error).
        documents: Return ``None`` for a file that is one JSON object without a ``type``
            (a request or named streams: read as a document instead).

    Returns:
        Its recordings (``[]``: not AG-UI, after a note), or ``None`` (see ``documents``).

    Raises:
        InvalidArgument: As :func:`finish`; a line that is not UTF-8 in an AG-UI file.
    """
    hasher = hashlib.sha256()
    splitter = Splitter(path, None, "lines", stamp)
    notes = Notes()
    items = 0
    offset = 0
    first_is_document = False
    with path.open("rb") as file:
        for number, read in enumerate(file, start=1):
            start = offset
            offset += len(read)
            raw = read
            if number == 1 and read.startswith(BOM):
                raw, start = read[len(BOM) :], len(BOM)
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
            outlined = outline_event(item)
            if isinstance(outlined, str):
                notes.skip(f"event {items} (line {number}): {outlined}")
            else:
                splitter.add(outlined, start, items, number)
            items += 1
    splitter.close(offset)
    if documents and items == 1 and first_is_document:
        return None  # one object without a type: a request or named streams, a document
    text_digest = hasher.hexdigest()[:16]
    found = [Recording(name, splitter.segments, digest=text_digest)] if splitter.segments else []
    return finish(path, found, notes, strict=strict, sse=False)


def finish(
    path: Path, found: list[Recording], notes: Notes, *, strict: bool, sse: bool
) -> list[Recording]:
    """Refuse a malformed file, note a file that is not AG-UI, warn about skipped items.

    Args:
        path: The file.
        found: Its recordings.
        notes: What was skipped.
        strict: The file was named directly: holding no AG-UI is an error.
        sse: The file is SSE: blocks that are not JSON are warned about, not refused.

    Returns:
        ``found`` (``[]`` for a file that holds no AG-UI, after a note).

    Raises:
        InvalidArgument: If ``found`` has runs and an item is not JSON (not SSE), or
            (``strict``) nothing was found.
    """
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
